// Command loadgen measures the collector binaries' cost and prints Markdown
// tables (BENCHMARKS.md).
//
// -mode gateway (default): pre-fills an in-process Kafka-protocol broker
// (kfake) with OTLP step spans of many jobs, GPU and InfiniBand metrics and
// logs, one signal at a time, runs bin/otelcol-gpu-gateway on
// distributions/gateway/config.yaml (read at run time) with its backends
// pointed at in-process accept-all sinks, waits until every consumer group
// has committed the last offset, and reads the gateway's CPU time from
// /proc. It then does the same with the contrib-only baseline derived from
// that configuration and prints CPU seconds per million items for both.
//
//	go run ./cmd/loadgen -spans 2000000 -points 5000000
//
// Runs a minute apart vary by several percent on a shared machine; -rounds
// N repeats the comparison, alternating which configuration goes first, and
// prints the median ratio.
//
// Both modes run the collector with the Go runtime settings that the base
// deployment gives it (-runtime-from): GOMAXPROCS from its CPU request (one
// core), and its GOGC and GOMEMLIMIT.
//
// -mode agent: one bin/otelcol-gpu-agent on one simulated 8-GPU node
// (test/testbed) with the agent configuration's default intervals;
// prints its CPU share of one core and its resident memory.
//
//	go run ./cmd/loadgen -mode agent -duration 3m
//
// -mode ib: the ib receiver's CPU per scrape against node_exporter's
// infiniband collector on one RoCE sysfs tree (ib.go).
//
//	go run ./cmd/loadgen -mode ib
//
// All need `make build` first.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/test/loadtest"
)

func main() {
	mode := flag.String("mode", "gateway", "gateway (throughput against the contrib-only baseline), agent (overhead on one node) or ib (CPU per scrape against node_exporter)")
	spans := flag.Int("spans", 200_000, "gateway: step spans to produce")
	points := flag.Int("points", 500_000, "gateway: metric data points to produce")
	logs := flag.Int("logs", 100_000, "gateway: log records to produce")
	jobs := flag.Int("jobs", 16, "gateway: concurrent training jobs")
	nodes := flag.Int("nodes-per-job", 8, "gateway: 8-GPU nodes per job")
	partitions := flag.Int("partitions", 3, "gateway: partitions per topic")
	breakdown := flag.Bool("breakdown", false, "gateway: also run the configuration without its detection pipelines")
	rounds := flag.Int("rounds", 1, "gateway: compare this many times, alternating which configuration runs first, and report the median ratio")
	gatewayConfig := flag.String("gateway-config", "distributions/gateway/config.yaml", "gateway: configuration, read at run time")
	contribOut := flag.String("write-contrib-config", "", "gateway: also write the derived contrib-only configuration here (e.g. test/load/gateway-contrib-only.yaml)")
	duration := flag.Duration("duration", 3*time.Minute, "agent: measured time")
	warmup := flag.Duration("warmup", 20*time.Second, "agent: time before the measurement starts")
	step := flag.Duration("step", 1500*time.Millisecond, "agent: training step period of the simulated job")
	agentConfig := flag.String("agent-config", "distributions/agent/config.yaml", "agent, ib: configuration (ib: its receivers.ib)")
	runtimeFrom := flag.String("runtime-from", "",
		"workload manifest whose Go runtime settings (GOMAXPROCS from the CPU request, GOGC, GOMEMLIMIT) the collector runs with; empty: the base deployment's ("+baseManifests["gateway"]+", "+baseManifests["agent"]+"); none: the runtime's defaults. The environment's own GOGC, GOMAXPROCS and GOMEMLIMIT win")
	binDir := flag.String("bin", "bin", "directory of the collector binaries (make build)")
	keep := flag.Bool("keep", false, "keep the work directory (logs, derived configuration)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		log.Fatal(err)
	}
	if *keep {
		fmt.Fprintf(os.Stderr, "work directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	switch *mode {
	case "gateway":
		if *contribOut != "" && *spans == 0 {
			err = writeContribOnly(*gatewayConfig, *contribOut)
			break
		}
		var runtime loadtest.GoRuntime
		if runtime, err = deployedRuntime(*runtimeFrom, "gateway"); err != nil {
			break
		}
		shape := loadtest.DefaultShape()
		shape.Jobs, shape.NodesPerJob = *jobs, *nodes
		var c *loadtest.Comparison
		c, err = loadtest.CompareGateway(ctx, loadtest.GatewayOptions{
			Binary: filepath.Join(*binDir, "otelcol-gpu-gateway"), ConfigPath: *gatewayConfig,
			Spans: *spans, Points: *points, Logs: *logs, Shape: shape, Partitions: *partitions, Breakdown: *breakdown, Rounds: *rounds,
			Runtime: runtime, Dir: dir, Progress: os.Stderr,
		}, *contribOut)
		if err == nil {
			c.WriteMarkdown(os.Stdout)
		}
	case "agent":
		var runtime loadtest.GoRuntime
		if runtime, err = deployedRuntime(*runtimeFrom, "agent"); err != nil {
			break
		}
		var r loadtest.AgentRun
		r, err = loadtest.RunAgent(ctx, loadtest.AgentOptions{
			Binary: filepath.Join(*binDir, "otelcol-gpu-agent"), ConfigPath: *agentConfig,
			Duration: *duration, Warmup: *warmup, StepPeriod: *step, Runtime: runtime, Dir: dir, Progress: os.Stderr,
		})
		if err == nil {
			r.WriteMarkdown(os.Stdout)
		}
	case "ib":
		err = runIB(ctx, *binDir, *agentConfig, *runtimeFrom, dir)
	default:
		err = fmt.Errorf("-mode %q: want gateway, agent or ib", *mode)
	}
	if err != nil {
		stop()
		log.Fatalf("loadgen: %v (logs in %s)", err, dir)
	}
}

// baseManifests are the base deployment's workloads, by the container
// (gateway, agent) that -mode measures.
var baseManifests = map[string]string{
	"gateway": "deploy/kubernetes/rendered/gateway-statefulset.yaml",
	"agent":   "deploy/kubernetes/rendered/agent-daemonset.yaml",
}

// deployedRuntime is the Go runtime settings of container in the manifest
// from (-runtime-from): empty is the base deployment, none is none.
func deployedRuntime(from, container string) (loadtest.GoRuntime, error) {
	switch from {
	case "none":
		return nil, nil
	case "":
		from = baseManifests[container]
	}
	return loadtest.DeployedRuntime(from, container)
}

// writeContribOnly only derives and writes the baseline (-spans 0).
func writeContribOnly(source, out string) error {
	doc, err := os.ReadFile(source)
	if err != nil {
		return err
	}
	full, err := loadtest.ParseGatewayConfig(doc)
	if err != nil {
		return err
	}
	root, err := loadtest.RepoRoot()
	if err != nil {
		return err
	}
	own, err := loadtest.OwnTypes(root)
	if err != nil {
		return err
	}
	contrib, err := full.ContribOnly(own)
	if err != nil {
		return err
	}
	return loadtest.WriteContribOnly(out, source, contrib)
}
