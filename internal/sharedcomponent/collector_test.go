package sharedcomponent

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// The issue 19 panic, through the collector's own graph: one receiver in a
// metrics, a logs and a traces pipeline, each with its own exporter. The
// collector stops its nodes in a topological order that varies from run to
// run; in some, one pipeline's exporter stops before another pipeline's
// receiver node. Kept running until its last pipeline stopped, the shared
// receiver then fed the stopped exporter (the kafka exporter dereferenced
// its closed client). Each exporter's Shutdown makes the receiver collect
// once more if it still runs, as its own loop would.
func TestCollectorNeverFeedsAStoppedExporter(t *testing.T) {
	for run := range 20 {
		r := &sharedRig{}
		r.run(t)
		if n := r.late.Load(); n != 0 {
			t.Fatalf("run %d: a stopped exporter was called %d times", run, n)
		}
		if r.delivered.Load() == 0 {
			t.Fatalf("run %d: the receiver delivered nothing while running", run)
		}
	}
}

const sharedPipelines = `
receivers: {shared: {}}
exporters: {strict/metrics: {}, strict/logs: {}, strict/traces: {}}
service:
  telemetry: {metrics: {level: none}, logs: {level: error}}
  pipelines:
    metrics: {receivers: [shared], exporters: [strict/metrics]}
    logs: {receivers: [shared], exporters: [strict/logs]}
    traces: {receivers: [shared], exporters: [strict/traces]}
`

type rigConfig struct{}

// sharedRig is one collector run: its factories, the shared receiver, and
// what the exporters saw.
type sharedRig struct {
	mu        sync.Mutex
	recv      *collecting
	late      atomic.Int64
	delivered atomic.Int64
}

func (r *sharedRig) run(t *testing.T) {
	t.Helper()
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: func() (otelcol.Factories, error) {
			f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
			var errR, errE error
			f.Receivers, errR = otelcol.MakeFactoryMap(r.receiverFactory())
			f.Exporters, errE = otelcol.MakeFactoryMap(r.exporterFactory())
			return f, errors.Join(errR, errE)
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs:              []string{"yaml:" + sharedPipelines},
				ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
			},
		},
		SkipSettingGRPCLogger: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- col.Run(context.Background()) }()
	for col.GetState() != otelcol.StateRunning {
		select {
		case err := <-done:
			t.Fatalf("collector ended before running: %v", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	r.collect() // one collection while everything runs
	col.Shutdown()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func (r *sharedRig) collect() {
	r.mu.Lock()
	recv := r.recv
	r.mu.Unlock()
	if recv != nil {
		recv.collect()
	}
}

func (r *sharedRig) receiverFactory() receiver.Factory {
	m := NewMap[component.Config, *collecting]()
	create := func() (*collecting, error) {
		c := &collecting{}
		r.mu.Lock()
		r.recv = c
		r.mu.Unlock()
		return c, nil
	}
	return receiver.NewFactory(component.MustNewType("shared"),
		func() component.Config { return &rigConfig{} },
		receiver.WithMetrics(func(_ context.Context, _ receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
			return m.Connect(cfg, create, func(c *collecting) { c.metrics = next })
		}, component.StabilityLevelDevelopment),
		receiver.WithLogs(func(_ context.Context, _ receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
			return m.Connect(cfg, create, func(c *collecting) { c.logs = next })
		}, component.StabilityLevelDevelopment),
		receiver.WithTraces(func(_ context.Context, _ receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
			return m.Connect(cfg, create, func(c *collecting) { c.traces = next })
		}, component.StabilityLevelDevelopment))
}

func (r *sharedRig) exporterFactory() exporter.Factory {
	newStrict := func() *strict { return &strict{rig: r} }
	return exporter.NewFactory(component.MustNewType("strict"),
		func() component.Config { return &rigConfig{} },
		exporter.WithMetrics(func(context.Context, exporter.Settings, component.Config) (exporter.Metrics, error) {
			return newStrict(), nil
		}, component.StabilityLevelDevelopment),
		exporter.WithLogs(func(context.Context, exporter.Settings, component.Config) (exporter.Logs, error) {
			return newStrict(), nil
		}, component.StabilityLevelDevelopment),
		exporter.WithTraces(func(context.Context, exporter.Settings, component.Config) (exporter.Traces, error) {
			return newStrict(), nil
		}, component.StabilityLevelDevelopment))
}

// collecting is a receiver shared by all three pipelines: while running,
// a collection goes to each pipeline. Shutdown waits for a collection under
// way, as a receiver waits for its loop.
type collecting struct {
	mu      sync.Mutex
	running bool
	metrics consumer.Metrics
	logs    consumer.Logs
	traces  consumer.Traces
}

func (c *collecting) Start(context.Context, component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = true
	return nil
}

func (c *collecting) Shutdown(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	return nil
}

func (c *collecting) collect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return
	}
	ctx := context.Background()
	md := pmetric.NewMetrics()
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("x")
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("x")
	_ = c.metrics.ConsumeMetrics(ctx, md)
	_ = c.logs.ConsumeLogs(ctx, ld)
	_ = c.traces.ConsumeTraces(ctx, td)
}

// strict is an exporter that must not be called once stopped. Its Shutdown
// gives the shared receiver the chance to collect once more.
type strict struct {
	rig     *sharedRig
	stopped atomic.Bool
}

func (s *strict) Start(context.Context, component.Host) error { return nil }

func (s *strict) Shutdown(context.Context) error {
	s.stopped.Store(true)
	s.rig.collect()
	return nil
}

func (s *strict) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *strict) consume() error {
	if s.stopped.Load() {
		s.rig.late.Add(1)
		return errors.New("strict: called after its shutdown")
	}
	s.rig.delivered.Add(1)
	return nil
}

func (s *strict) ConsumeMetrics(context.Context, pmetric.Metrics) error { return s.consume() }
func (s *strict) ConsumeLogs(context.Context, plog.Logs) error          { return s.consume() }
func (s *strict) ConsumeTraces(context.Context, ptrace.Traces) error    { return s.consume() }
