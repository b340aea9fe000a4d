package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// AgentOptions configure an overhead run: one agent binary on one simulated
// 8-GPU node (testbed: dcgm-exporter page, sysfs tree, flight-recorder
// dumps, 8 ranks' step spans) with the agent configuration's default
// intervals.
type AgentOptions struct {
	Binary     string // bin/otelcol-gpu-agent
	ConfigPath string // distributions/agent/config.yaml
	Duration   time.Duration
	// Warmup is excluded from the CPU figure: start-up, the first scrapes.
	Warmup     time.Duration
	StepPeriod time.Duration
	// Runtime is the Go runtime settings the agent runs with; none: the
	// runtime's defaults on every core.
	Runtime  GoRuntime
	Dir      string
	Progress io.Writer
}

// AgentRun is the agent's measured overhead.
type AgentRun struct {
	Options  AgentOptions
	CPU      time.Duration // utime+stime over Duration
	Wall     time.Duration
	Memory   Memory
	Records  map[string]int64 // Kafka messages per topic at the end
	Loops    int              // complete passes over the scenario's steps
	Scenario string
}

// CPUPercent is the agent's share of one core.
func (r AgentRun) CPUPercent() float64 { return 100 * r.CPU.Seconds() / r.Wall.Seconds() }

// RunAgent runs the agent for Warmup+Duration while the simulated node
// trains, and measures it.
func RunAgent(ctx context.Context, opts AgentOptions) (AgentRun, error) {
	run := AgentRun{Options: opts, Scenario: "healthy"}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	to := testbed.DefaultOptions()
	to.Ranks = 8
	to.Scenarios = []string{run.Scenario}
	to.StepPeriod = opts.StepPeriod
	to.Dir = opts.Dir
	cluster, err := testbed.NewCluster(to)
	if err != nil {
		return run, err
	}
	defer cluster.Close()
	nodes := cluster.Nodes()
	if len(nodes) != 1 {
		return run, fmt.Errorf("loadtest: %d simulated nodes, want 1", len(nodes))
	}
	n := nodes[0]

	broker, err := StartBroker(3)
	if err != nil {
		return run, err
	}
	defer broker.Close()
	var addrs testbed.AgentAddrs
	for _, addr := range []*string{&addrs.Health, &addrs.OTLPHTTP, &addrs.OTLPGRPC, &addrs.Telemetry} {
		if *addr, err = FreeAddr(); err != nil {
			return run, err
		}
	}
	health, httpAddr := addrs.Health, addrs.OTLPHTTP
	// The agent configuration's own intervals: only the inputs' locations
	// are set.
	env, err := n.AgentEnv(broker.Addr, opts.Dir, addrs, false)
	if err != nil {
		return run, err
	}
	agent, err := startProcess(opts.Dir, "agent", append(opts.Runtime.added(), env...), opts.Binary, "--config", opts.ConfigPath)
	if err != nil {
		return run, err
	}
	defer agent.Stop(stopGrace)
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = waitHealthy(startCtx, agent, health)
	cancel()
	if err != nil {
		return run, err
	}
	fmt.Fprintf(progress, "agent pid %d healthy on %s (job %s); warming up %s, measuring %s\n", agent.Pid(), n.Host, n.JobID, opts.Warmup, opts.Duration)

	// The job trains for the whole run: the scenario's steps again and
	// again (the step numbers repeat; the flight recorder's sequence goes
	// on).
	driveCtx, stopDriving := context.WithCancel(ctx)
	driven := make(chan struct{})
	var driveErr error
	loops := 0
	go func() {
		defer close(driven)
		url := "http://" + httpAddr + "/v1/traces"
		for driveCtx.Err() == nil {
			if err := cluster.Drive(driveCtx, func(string) string { return url }); err != nil {
				if driveCtx.Err() == nil {
					driveErr = err
				}
				return
			}
			loops++
		}
	}()
	defer func() {
		stopDriving()
		<-driven
	}()

	if err := sleep(ctx, opts.Warmup); err != nil {
		return run, err
	}
	cpu0, err := CPUTime(agent.Pid())
	if err != nil {
		return run, err
	}
	t0 := time.Now()
	if err := sleep(ctx, opts.Duration); err != nil {
		return run, err
	}
	cpu1, err := CPUTime(agent.Pid())
	if err != nil {
		return run, err
	}
	run.Wall, run.CPU = time.Since(t0), cpu1-cpu0
	if run.Memory, err = MemoryOf(agent.Pid()); err != nil {
		return run, err
	}
	if exited, exitErr := agent.Exited(); exited {
		return run, fmt.Errorf("loadtest: the agent exited (%v):\n%s", exitErr, tail(agent, 30))
	}
	ends, err := broker.endOffsets(ctx)
	if err != nil {
		return run, err
	}
	run.Records = map[string]int64{}
	for topic, parts := range ends {
		for _, end := range parts {
			run.Records[topic] += end
		}
	}
	stopDriving()
	<-driven
	if driveErr != nil {
		return run, driveErr
	}
	run.Loops = loops
	if run.Records[TopicSpans] == 0 || run.Records[TopicMetrics] == 0 {
		return run, errors.New("loadtest: the agent sent no spans or no metrics to Kafka:\n" + tail(agent, 30))
	}
	return run, nil
}

// WriteMarkdown prints the agent's overhead as a Markdown table.
func (r AgentRun) WriteMarkdown(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "Agent overhead: one agent, one simulated 8-GPU node (testbed %q: dcgm-exporter page, sysfs, flight-recorder dumps, 8 ranks' step spans every %s), agent config defaults (GPU 10 s, profiling 30 s, IB 10 s), %s after a %s warm-up\n\n",
		r.Scenario, o.StepPeriod, o.Duration, o.Warmup)
	if runtime := o.Runtime.Env(); len(runtime) > 0 {
		fmt.Fprintf(w, "Agent Go runtime: %s\n\n", strings.Join(runtime, " "))
	}
	fmt.Fprintln(w, "| measure | value | aim |")
	fmt.Fprintln(w, "|---|---:|---|")
	fmt.Fprintf(w, "| CPU, %% of one core | %.2f | ≤ 1 |\n", r.CPUPercent())
	fmt.Fprintf(w, "| CPU seconds over %s s | %.2f | |\n", durationSeconds(r.Wall), r.CPU.Seconds())
	fmt.Fprintf(w, "| RSS now (VmRSS) MiB | %.1f | ≤ 100 |\n", mib(r.Memory.RSS))
	fmt.Fprintf(w, "| peak RSS (VmHWM) MiB | %.1f | ≤ 100 |\n", mib(r.Memory.HWM))
	fmt.Fprintf(w, "| Kafka messages (spans / metrics / logs / faults) | %d / %d / %d / %d | |\n",
		r.Records[TopicSpans], r.Records[TopicMetrics], r.Records[TopicLogs], r.Records[TopicFaults])
}
