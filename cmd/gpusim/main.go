// Command gpusim runs the fault-injection testbed (test/testbed): it
// simulates training jobs on GPU nodes, injects the faults of the
// committed scenarios at the agent's raw inputs, runs the real components
// in one process and prints per fault type precision, recall and time to
// the first open fault record, as Markdown.
//
//	go run ./cmd/gpusim -seeds 3            # the 64-rank suite, three runs
//	go run ./cmd/gpusim -ranks 1024 -seeds 1
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gpusim:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		seed      = flag.Uint64("seed", 0, "seed of the first run (0: random); run i uses seed+i")
		seeds     = flag.Int("seeds", 1, "number of runs")
		ranks     = flag.Int("ranks", 0, "ranks per job (0: the scenarios' own, 64)")
		scenarios = flag.String("scenarios", "", "comma-separated scenario names (default all)")
		step      = flag.Duration("step", 0, "wall-clock length of a step (default 1s)")
		verbose   = flag.Bool("v", false, "log progress")
		logLevel  = flag.String("log-level", "warn", "level of the collector's own logs")
		failBelow = flag.Float64("fail-below", 0, "exit 1 when any type's precision or recall is below this, or a hard negative opened a fault")
	)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	logger := zap.NewNop()
	if *verbose {
		logger, _ = zap.NewDevelopment()
	}
	var names []string
	if *scenarios != "" {
		names = strings.Split(*scenarios, ",")
	}
	total := testbed.NewTotals()
	for i := 0; i < *seeds; i++ {
		opts := testbed.DefaultOptions()
		if *seed != 0 {
			opts.Seed = *seed + uint64(i)
		}
		opts.Ranks, opts.Scenarios, opts.Logger, opts.LogLevel = *ranks, names, logger, *logLevel
		if *step > 0 {
			opts.StepPeriod = *step
		}
		started := time.Now()
		rep, err := testbed.Run(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Printf("## run %d (%s)\n\n", i+1, time.Since(started).Round(time.Second))
		rep.Write(os.Stdout)
		fmt.Println()
		total.Add(rep)
	}
	if *seeds > 1 {
		fmt.Printf("## all %d runs\n\n", *seeds)
		total.Write(os.Stdout)
	}
	if *failBelow > 0 && !total.Meets(*failBelow) {
		return errors.New("detection quality below the target")
	}
	return nil
}
