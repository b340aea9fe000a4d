package testbed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"
	"github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"
)

// captured is one fault record as it left the correlator.
type captured struct {
	record fault.Record
	at     time.Time
}

// capture is the in-process end of the faults pipeline: an exporter that
// keeps every fault record with its arrival time.
type capture struct {
	mu      sync.Mutex
	records []captured
	bad     []error // records that did not parse: a broken record is a failure too
}

func (c *capture) ConsumeLogs(_ context.Context, ld plog.Logs) error {
	now := time.Now()
	records, errs := fault.FromLogs(ld)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range records {
		c.records = append(c.records, captured{record: r, at: now})
	}
	c.bad = append(c.bad, errs...)
	return nil
}

func (c *capture) snapshot() ([]captured, []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.records...), append([]error(nil), c.bad...)
}

type captureExporter struct {
	*capture
	component.StartFunc
	component.ShutdownFunc
}

func (captureExporter) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

var captureType = component.MustNewType("testbed_capture")

type captureConfig struct{}

func (c *capture) factory() exporter.Factory {
	return exporter.NewFactory(captureType, func() component.Config { return &captureConfig{} },
		exporter.WithLogs(func(context.Context, exporter.Settings, component.Config) (exporter.Logs, error) {
			return captureExporter{capture: c}, nil
		}, component.StabilityLevelDevelopment))
}

// factories are the real components the agent and gateway run, plus the
// capture exporter.
func factories(c *capture) (otelcol.Factories, error) {
	var errs []error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	var err error
	f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](
		dcgmreceiver.NewFactory(), ibreceiver.NewFactory(), ncclflightreceiver.NewFactory(), otlpreceiver.NewFactory())
	errs = append(errs, err)
	f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](
		nodestateprocessor.NewFactory(), stepspanprocessor.NewFactory(), stragglerprocessor.NewFactory(), batchprocessor.NewFactory())
	errs = append(errs, err)
	f.Connectors, err = otelcol.MakeFactoryMap[connector.Factory](faultcorrelatorconnector.NewFactory(), steplogsconnector.NewFactory())
	errs = append(errs, err)
	f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](nodestateextension.NewFactory())
	errs = append(errs, err)
	f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](c.factory())
	errs = append(errs, err)
	return f, errors.Join(errs...)
}

// pipelineConfig is the collector configuration of a run: one dcgm, ib and
// ncclflight receiver per simulated node (as each node's agent has), the
// agent's step path (stepspan with the node's health) and the gateway's
// straggler processor and correlator, all in one process as the all-in-one
// distribution runs them.
func pipelineConfig(opts Options, jobs []*job, pageURL func(*node) string, otlpEndpoint string) (string, error) {
	receivers := map[string]any{
		"otlp": map[string]any{"protocols": map[string]any{"http": map[string]any{"endpoint": otlpEndpoint}}},
	}
	var metricsIn, logsIn, tracesIn []string
	for _, j := range jobs {
		for _, nd := range j.nodes {
			if !opts.lightInputs() {
				dcgm := "dcgm/" + nd.host
				receivers[dcgm] = map[string]any{
					"source": "exporter", "endpoint": pageURL(nd), "host_name": nd.host,
					"collection_interval": opts.ScrapeInterval.String(),
					"profiling_interval":  opts.ScrapeInterval.String(),
				}
				ib := "ib/" + nd.host
				receivers[ib] = map[string]any{
					"sysfs_root": nd.sysfsRoot, "host_name": nd.host,
					"collection_interval": opts.ScrapeInterval.String(),
				}
				metricsIn = append(metricsIn, dcgm, ib)
				logsIn = append(logsIn, dcgm)
			}
			if nd.frRoot != "" {
				// No job_id: the receiver takes each dump's job from its
				// directory, as the agent of a node that runs several jobs.
				fr := "ncclflight/" + nd.host
				receivers[fr] = map[string]any{
					"host_name": nd.host,
					"flight_recorder": map[string]any{
						"directories": []string{nd.frRoot}, "settle_time": "100ms", "rescan_interval": "1s",
						"stall_after": stallAfter(opts.StepPeriod).String(),
					},
				}
				metricsIn = append(metricsIn, fr)
				logsIn = append(logsIn, fr)
				tracesIn = append(tracesIn, fr)
			}
		}
	}
	logsIn = append(logsIn, "otlp")
	tracesIn = append(tracesIn, "otlp", "steplogs")
	// One stepspan stands for every node's agent here: its bounds, per node
	// in production, are the default's times the nodes (else a run of many
	// jobs would drop collectives no agent drops).
	nodes, ranks := 0, 0
	for _, j := range jobs {
		nodes, ranks = nodes+len(j.nodes), ranks+j.sc.Ranks()
	}
	perNode := stepspanprocessor.NewFactory().CreateDefaultConfig().(*stepspanprocessor.Config)
	batch := map[string]any{"timeout": "200ms"}
	cfg := map[string]any{
		"extensions": map[string]any{"nodestate": nil},
		"receivers":  receivers,
		"processors": map[string]any{
			"nodestate": map[string]any{"extension": "nodestate"},
			// orphan_after scaled as node_silent's window is (silentRuleFor):
			// a job without step spans (no_step_spans) sends its collectives
			// only as orphans, and at the default 30 s its nodes would look
			// silent for the testbed's 8-step window.
			"stepspan": map[string]any{"collective_wait": opts.CollectiveWait.String(), "nodestate": "nodestate",
				"orphan_after":    max(3*opts.StepPeriod, 2*opts.CollectiveWait).String(),
				"max_collectives": perNode.MaxCollectives * max(nodes, 1), "max_ranks": max(perNode.MaxRanks, ranks)},
			"straggler": map[string]any{"decision_wait": opts.DecisionWait.String()},
			"batch":     batch,
		},
		"connectors": map[string]any{
			"steplogs": nil,
			"faultcorrelator": map[string]any{
				"mode":                "gateway",
				"evaluation_interval": opts.EvaluationInterval.String(),
				"rules":               opts.RuleOverrides,
			},
		},
		"exporters": map[string]any{captureType.String(): nil},
		"service": map[string]any{
			"extensions": []string{"nodestate"},
			"telemetry": map[string]any{
				"logs":    map[string]any{"level": opts.LogLevel},
				"metrics": map[string]any{"level": "none"},
			},
			"pipelines": map[string]any{
				"metrics":     map[string]any{"receivers": nonEmpty(metricsIn), "processors": []string{"nodestate", "batch"}, "exporters": []string{"faultcorrelator"}},
				"logs":        map[string]any{"receivers": logsIn, "processors": []string{"nodestate", "batch"}, "exporters": []string{"faultcorrelator", "steplogs"}},
				"traces":      map[string]any{"receivers": tracesIn, "processors": []string{"stepspan", "straggler", "batch"}, "exporters": []string{"faultcorrelator"}},
				"logs/faults": map[string]any{"receivers": []string{"faultcorrelator"}, "exporters": []string{captureType.String()}},
			},
		},
	}
	if len(metricsIn) == 0 {
		// Light inputs: no node receivers; the correlator still needs a
		// metrics pipeline for nothing, so leave it out.
		delete(cfg["service"].(map[string]any)["pipelines"].(map[string]any), "metrics")
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("testbed: encoding the collector configuration: %w", err)
	}
	return string(out), nil
}

func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return []string{"otlp"}
	}
	return s
}

// runCollector starts the collector on cfgYAML and returns a stop function
// that shuts it down and returns Run's error; logOpts go to its logger.
func runCollector(ctx context.Context, cfgYAML string, c *capture, logOpts ...zap.Option) (stop func() error, err error) {
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "gpusim", Description: "otelcol-gpu testbed", Version: "dev"},
		Factories: func() (otelcol.Factories, error) { return factories(c) },
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs:              []string{"yaml:" + cfgYAML},
				ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
			},
		},
		SkipSettingGRPCLogger: true,
		LoggingOptions:        logOpts,
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: creating the collector: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- col.Run(ctx) }()
	for {
		switch col.GetState() {
		case otelcol.StateRunning:
			return func() error {
				col.Shutdown()
				return <-done
			}, nil
		case otelcol.StateClosed:
			return nil, fmt.Errorf("testbed: the collector stopped at start: %w", <-done)
		}
		select {
		case err := <-done:
			return nil, fmt.Errorf("testbed: the collector stopped at start: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stallAfter scales the ncclflight receiver's stall_after (default 1m) to
// the simulated step, as silentRuleFor scales node_silent: a rank whose
// dump was written 5 steps after its newest enqueue had stopped. The suite's
// hangs stop their job at step 16 of 36; 1 minute of stall would never be
// seen before the run ends.
func stallAfter(step time.Duration) time.Duration { return 5 * step }
