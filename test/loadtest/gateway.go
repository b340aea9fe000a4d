package loadtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/otelcol-gpu/otelcol-gpu/test/childproc"
)

// GatewayOptions configure a throughput run.
type GatewayOptions struct {
	Binary     string // bin/otelcol-gpu-gateway
	ConfigPath string // distributions/gateway/config.yaml, read at run time
	Spans      int
	Points     int
	Logs       int
	Shape      Shape
	Partitions int
	// Breakdown also runs the full configuration without its detection
	// pipelines.
	Breakdown bool
	// Rounds runs the comparison this many times (at least once), the two
	// configurations alternating which goes first: runs a minute apart
	// differ by several percent on a shared machine, so a ratio is only
	// worth its median over rounds.
	Rounds int
	// Runtime is the Go runtime settings the gateway runs with in both
	// configurations; none: the runtime's defaults on every core.
	Runtime GoRuntime
	// RepoDir is the repository (its components' metadata.yaml name the
	// types the contrib-only baseline leaves out); empty: found from the
	// working directory.
	RepoDir string
	// Dir holds the gateway's logs and the derived configuration.
	Dir string
	// Progress receives one line per step; nil discards.
	Progress io.Writer
}

// Phase is one signal's share of a run.
type Phase struct {
	Signal   string // spans, points, logs
	Produced int
	Errors   int // spans with status ERROR among Produced
	// CPU is the gateway's utime+stime over the phase, NetCPU the same less
	// its idle rate over the phase's wall time.
	CPU, NetCPU time.Duration
	Wall        time.Duration
	// Arrived is what the backend sink received during the phase (more than
	// produced where the gateway adds items: root and verdict spans, step
	// metrics, fault records).
	Arrived int64
	Spans   SpanSnapshot // the traces phase's Tempo counts
}

// CPUPerMillion is the phase's net CPU seconds per million produced items.
func (p Phase) CPUPerMillion() float64 {
	if p.Produced == 0 {
		return 0
	}
	return p.NetCPU.Seconds() / float64(p.Produced) * 1e6
}

// GatewayRun is the result of one configuration.
type GatewayRun struct {
	Config       string // full | contrib-only
	TailSampling bool
	IdleCPU      float64 // CPU seconds per second while idle
	StartupCPU   time.Duration
	Phases       []Phase
	Memory       Memory
	BadRequests  int64
}

// Phase returns the run's phase of the signal.
func (r GatewayRun) Phase(signal string) Phase {
	for _, p := range r.Phases {
		if p.Signal == signal {
			return p
		}
	}
	return Phase{}
}

// RunGateway runs the gateway binary on cfg (named name) against a fresh
// broker and fresh sinks: idle first, then one phase per signal (spans,
// metric points, logs), each produced in full and consumed to the last
// offset by every consumer group of the configuration, and the gateway's CPU
// time read from /proc around each phase.
func RunGateway(ctx context.Context, opts GatewayOptions, name string, cfg GatewayConfig) (GatewayRun, error) {
	run := GatewayRun{Config: name, TailSampling: cfg.HasProcessor("traces", "tail_sampling")}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	cfgYAML, err := cfg.Marshal()
	if err != nil {
		return run, err
	}
	cfgPath := filepath.Join(opts.Dir, "gateway-"+name+".yaml")
	if err := os.WriteFile(cfgPath, cfgYAML, 0o600); err != nil {
		return run, fmt.Errorf("loadtest: %w", err)
	}

	broker, err := StartBroker(max(opts.Partitions, 1))
	if err != nil {
		return run, err
	}
	defer broker.Close()
	sinks, err := StartSinks()
	if err != nil {
		return run, err
	}
	defer sinks.Close()

	health, err1 := FreeAddr()
	telemetry, err2 := FreeAddr()
	if err1 != nil || err2 != nil {
		return run, fmt.Errorf("loadtest: no free port: %v %v", err1, err2)
	}
	_, telemetryPort, _ := splitHostPort(telemetry)
	gw, err := startProcess(opts.Dir, "gateway-"+name, append(opts.Runtime.added(),
		"KAFKA_BROKERS="+broker.Addr,
		"PROMETHEUS_REMOTE_WRITE_URL="+sinks.PromURL,
		"LOKI_OTLP_ENDPOINT="+sinks.LokiURL,
		"TEMPO_OTLP_ENDPOINT="+sinks.TempoAddr,
		"OTELCOL_GPU_HEALTH_ENDPOINT="+health,
		"OTELCOL_GPU_TELEMETRY_PORT="+telemetryPort,
		"OTELCOL_GPU_STORAGE_DIR="+filepath.Join(opts.Dir, "gateway-"+name+"-storage"),
	), opts.Binary, "--config", cfgPath)
	if err != nil {
		return run, err
	}
	defer gw.Stop(stopGrace)
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = waitHealthy(startCtx, gw, health)
	cancel()
	if err != nil {
		return run, err
	}
	groups := cfg.ConsumerGroups()
	fmt.Fprintf(progress, "%s: gateway pid %d healthy; consumer groups %v\n", name, gw.Pid(), groups)

	// Idle: what the gateway burns with nothing to do (timers, group
	// heartbeats), subtracted from every phase.
	if run.StartupCPU, err = CPUTime(gw.Pid()); err != nil {
		return run, err
	}
	const idleFor = 3 * time.Second
	if err := sleep(ctx, idleFor); err != nil {
		return run, err
	}
	idleEnd, err := CPUTime(gw.Pid())
	if err != nil {
		return run, err
	}
	run.IdleCPU = (idleEnd - run.StartupCPU).Seconds() / idleFor.Seconds()

	base := time.Now().Add(-time.Hour)
	// Tail sampling holds spans for its decision_wait (default 5 s) after
	// the kafka receiver marked them: the traces phase ends once Tempo has
	// seen nothing new for longer than that.
	spanQuiet := 2 * time.Second
	if run.TailSampling {
		spanQuiet = 8 * time.Second
	}
	phases := []struct {
		signal  string
		produce func(emit func(*kgo.Record) error) (int, int, error)
		arrived func() int64 // what the backend sink has received
		quiet   time.Duration
	}{
		{"spans", func(emit func(*kgo.Record) error) (int, int, error) {
			return opts.Shape.SpanMessages(opts.Spans, base, emit)
		}, sinks.Spans.count, spanQuiet},
		{"points", func(emit func(*kgo.Record) error) (int, int, error) {
			n, err := opts.Shape.MetricMessages(opts.Points, base, emit)
			return n, 0, err
		}, sinks.Samples.Load, 2 * time.Second},
		{"logs", func(emit func(*kgo.Record) error) (int, int, error) {
			n, err := opts.Shape.LogMessages(opts.Logs, base, emit)
			return n, 0, err
		}, sinks.Logs.Load, 2 * time.Second},
	}
	for _, ph := range phases {
		arrivedBefore := ph.arrived()
		cpu0, err := CPUTime(gw.Pid())
		if err != nil {
			return run, err
		}
		t0 := time.Now()
		emit, flush := broker.Producer(ctx)
		produced, errs, err := ph.produce(emit)
		if err == nil {
			err = flush()
		}
		if err != nil {
			return run, err
		}
		fmt.Fprintf(progress, "%s: %d %s produced in %s; waiting for every group\n", name, produced, ph.signal, time.Since(t0).Round(time.Millisecond))
		if err := waitConsumed(ctx, broker, groups, gw, ph.arrived, ph.quiet); err != nil {
			return run, err
		}
		cpu1, err := CPUTime(gw.Pid())
		if err != nil {
			return run, err
		}
		wall := time.Since(t0)
		p := Phase{
			Signal: ph.signal, Produced: produced, Errors: errs,
			CPU: cpu1 - cpu0, Wall: wall, Arrived: ph.arrived() - arrivedBefore,
		}
		p.NetCPU = p.CPU - time.Duration(run.IdleCPU*wall.Seconds()*float64(time.Second))
		if ph.signal == "spans" {
			p.Spans = sinks.Spans.Snapshot()
		}
		fmt.Fprintf(progress, "%s: %s consumed: CPU %s over %s, %d arrived\n", name, ph.signal, p.CPU.Round(10*time.Millisecond), wall.Round(time.Millisecond), p.Arrived)
		run.Phases = append(run.Phases, p)
	}
	if run.Memory, err = MemoryOf(gw.Pid()); err != nil {
		return run, err
	}
	run.BadRequests = sinks.BadRequests.Load()
	return run, nil
}

// waitConsumed returns once every group has committed the end of its topic
// and the sink's count has not moved for quiet.
func waitConsumed(ctx context.Context, broker *Broker, groups []GroupTopic, gw *childproc.Process, arrived func() int64, quiet time.Duration) error {
	last, lastChange := arrived(), time.Now()
	var lags map[GroupTopic]int64
	for {
		if exited, err := gw.Exited(); exited {
			return fmt.Errorf("loadtest: the gateway exited (%v):\n%s", err, tail(gw, 30))
		}
		var err error
		if lags, err = broker.Lag(ctx, groups); err != nil {
			return err
		}
		if n := arrived(); n != last {
			last, lastChange = n, time.Now()
		}
		if TotalLag(lags) == 0 && time.Since(lastChange) >= quiet {
			return nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("loadtest: still lagging (%s): %w", FormatLag(lags), err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
