package shutdowndeadlineextension

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

var holdType = component.MustNewType("hold")

// holdingExporter's Shutdown does not return until released: an exporter
// draining its in-memory queue into a backend that never answers.
type holdingExporter struct {
	entered chan struct{} // closed when Shutdown begins
	release chan struct{} // Shutdown returns once closed
	once    sync.Once
}

func (*holdingExporter) Start(context.Context, component.Host) error { return nil }
func (*holdingExporter) Capabilities() consumer.Capabilities         { return consumer.Capabilities{} }
func (*holdingExporter) ConsumeTraces(context.Context, ptrace.Traces) error {
	return nil
}

func (h *holdingExporter) Shutdown(context.Context) error {
	h.once.Do(func() { close(h.entered) })
	<-h.release
	return nil
}

const holdingConfig = `
extensions:
  shutdown_deadline:
    deadline: 25s
receivers: {nop: {}}
exporters: {hold: {}}
service:
  extensions: [shutdown_deadline]
  telemetry: {metrics: {level: none}, logs: {level: info}}
  pipelines:
    traces: {receivers: [nop], exporters: [hold]}
`

// collectorRun is one collector in this process with the extension on a
// fake timer and an exporter that holds its Shutdown until released.
type collectorRun struct {
	timer *fakeTimer
	hold  *holdingExporter
	logs  *observer.ObservedLogs
	col   *otelcol.Collector
	done  chan error

	mu    sync.Mutex
	exits []int
}

func startCollector(t *testing.T) *collectorRun {
	t.Helper()
	r := &collectorRun{
		timer: &fakeTimer{},
		hold:  &holdingExporter{entered: make(chan struct{}), release: make(chan struct{})},
		done:  make(chan error, 1),
	}
	// The exit ends the process; here it lets the held Shutdown return,
	// as the end of the process would, so the collector finishes.
	exit := func(code int) {
		r.mu.Lock()
		r.exits = append(r.exits, code)
		r.mu.Unlock()
		close(r.hold.release)
	}
	var core zapcore.Core
	core, r.logs = observer.New(zap.InfoLevel)
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: func() (otelcol.Factories, error) {
			f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
			var errs [3]error
			f.Extensions, errs[0] = otelcol.MakeFactoryMap[extension.Factory](newFactory(exit, r.timer.afterFunc))
			f.Receivers, errs[1] = otelcol.MakeFactoryMap[receiver.Factory](receivertest.NewNopFactory())
			f.Exporters, errs[2] = otelcol.MakeFactoryMap[exporter.Factory](exporter.NewFactory(holdType,
				func() component.Config { return &struct{}{} },
				exporter.WithTraces(func(context.Context, exporter.Settings, component.Config) (exporter.Traces, error) {
					return r.hold, nil
				}, component.StabilityLevelAlpha)))
			for _, err := range errs {
				if err != nil {
					return f, err
				}
			}
			return f, nil
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs:              []string{"yaml:" + holdingConfig},
				ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
			},
		},
		LoggingOptions:        []zap.Option{zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })},
		SkipSettingGRPCLogger: true,
	})
	require.NoError(t, err)
	r.col = col
	go func() { r.done <- col.Run(context.Background()) }()
	for col.GetState() != otelcol.StateRunning {
		select {
		case err := <-r.done:
			t.Fatalf("the collector stopped at start: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return r
}

func (r *collectorRun) exited() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.exits...)
}

// With the collector's real service: the deadline is armed when the
// shutdown begins, before any pipeline stops (the exporter's Shutdown finds
// it armed), and a pipeline that does not stop ends in the exit, the log
// naming the deadline and the held exporter's Shutdown.
func TestCollectorHeldByAnExporter(t *testing.T) {
	r := startCollector(t)
	armed, _ := r.timer.state()
	require.Empty(t, armed, "armed while the collector runs")

	go r.col.Shutdown()
	<-r.hold.entered
	armed, stopped := r.timer.state()
	require.Equal(t, []time.Duration{25 * time.Second}, armed, "the deadline is armed before the pipelines stop")
	assert.False(t, stopped)
	assert.Empty(t, r.exited())

	r.timer.expire(t) // the deadline passes with the exporter still in its Shutdown
	require.NoError(t, <-r.done)
	assert.Equal(t, []int{ExitCode}, r.exited())
	recs := r.logs.FilterMessage(deadlineMessage).All()
	require.Len(t, recs, 1)
	summary, _ := recs[0].ContextMap()["goroutines"].(string)
	assert.Contains(t, summary, "shutdowndeadlineextension.(*holdingExporter).Shutdown", "the summary names what held the shutdown")
	assert.Equal(t, "extension", recs[0].ContextMap()["otelcol.component.kind"], "the collector's component fields: %v", recs[0].ContextMap())
}

// A shutdown that ends: the extension's own Shutdown, after the pipelines,
// stops the timer, and nothing exits.
func TestCollectorShutdownInTime(t *testing.T) {
	r := startCollector(t)
	close(r.hold.release)
	r.col.Shutdown()
	require.NoError(t, <-r.done)
	armed, stopped := r.timer.state()
	assert.Equal(t, []time.Duration{25 * time.Second}, armed)
	assert.True(t, stopped, "the extension's Shutdown disarms the deadline")
	assert.Empty(t, r.exited())
	assert.Zero(t, r.logs.FilterMessage(deadlineMessage).Len())
	assert.Equal(t, 1, r.logs.FilterMessage(armedMessage).Len())
}
