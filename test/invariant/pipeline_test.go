package invariant

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"
	"github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"
)

// The node the agent runs on, its GPUs (what its GPU receiver reports),
// and the node a sender would like to hurt.
const (
	ownHost    = "node-own"
	victimHost = "node-victim"
	victimGPU  = "GPU-7e57ed00-0000-4000-8000-000000000099"
)

var ownGPUs = []string{"GPU-0a0a0a0a-0000-4000-8000-000000000000", "GPU-0a0a0a0a-0000-4000-8000-000000000001"}

// The pipelines as distributions/agent/config.yaml and
// distributions/gateway/config.yaml wire them, in process. Left out: the
// receivers and the Kafka exporters and receivers (the topics are a
// protobuf round trip), memory_limiter and batch (they pass data on
// unchanged or refuse it whole), and the gateway's exporters other than the
// correlator (stepmetrics, tail sampling: nothing decides on them).
// TestPipelinesAsShipped checks these lists against the configs.
var (
	agentScripts = []string{"memory_limiter", "provenance"}             // logs/, metrics/, traces/scripts
	agentLogs    = []string{"memory_limiter", "nodestate", "ratelimit"} // not batched: a full queue refuses the sender (docs/architecture.md)
	agentMetrics = []string{"memory_limiter", "nodestate", "batch"}
	agentTraces  = []string{"memory_limiter", "stepspan", "ratelimit", "batch"}
	gatewayTrace = []string{"memory_limiter", "ratelimit", "straggler"}
)

// tap keeps a copy of what passes (what the provenance processor lets
// through) and passes it on.
type tap struct {
	mu      sync.Mutex
	logs    []plog.Logs
	metrics []pmetric.Metrics
	traces  []ptrace.Traces
	nextL   consumer.Logs
	nextM   consumer.Metrics
	nextT   consumer.Traces
}

// Capabilities: a tap copies, it changes nothing.
func (t *tap) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (t *tap) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	c := plog.NewLogs()
	ld.CopyTo(c)
	t.mu.Lock()
	t.logs = append(t.logs, c)
	t.mu.Unlock()
	return t.nextL.ConsumeLogs(ctx, ld)
}

func (t *tap) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	c := pmetric.NewMetrics()
	md.CopyTo(c)
	t.mu.Lock()
	t.metrics = append(t.metrics, c)
	t.mu.Unlock()
	return t.nextM.ConsumeMetrics(ctx, md)
}

func (t *tap) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	c := ptrace.NewTraces()
	td.CopyTo(c)
	t.mu.Lock()
	t.traces = append(t.traces, c)
	t.mu.Unlock()
	return t.nextT.ConsumeTraces(ctx, td)
}

// extHost is a host with the agent's nodestate extension.
type extHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h extHost) GetExtensions() map[component.ID]component.Component { return h.exts }

// world is one agent and one gateway replica, fresh for each case.
type world struct {
	// What the provenance processor passes on.
	tap *tap
	// The agent's OTLP pipelines' first component for each signal.
	provLogs    processor.Logs
	provMetrics processor.Metrics
	provTraces  processor.Traces
	// The agent's own receivers' path (the inventory, genuine faults).
	ownMetrics consumer.Metrics
	ownLogs    consumer.Logs
	// The Kafka topics the agent writes.
	kafkaLogs    consumertest.LogsSink
	kafkaMetrics consumertest.MetricsSink
	kafkaTraces  consumertest.TracesSink
	// The gateway's inputs: traces through rate limit and straggler, the
	// detection pipelines straight to the correlator.
	gwTraces  consumer.Traces
	gwMetrics consumer.Metrics
	gwLogs    consumer.Logs
	// What the correlator hands to kafka/faults.
	faults consumertest.LogsSink

	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	host   component.Host
	// agent and gateway components, in shutdown order (upstream first).
	agent, gateway []component.Component
	started        []component.Component
}

func newWorld() (*world, error) {
	agentCfg, gatewayCfg, err := configs()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	w := &world{reader: sdkmetric.NewManualReader()}
	w.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader))

	// The nodestate extension, as the agent configures it.
	extFactory := nodestateextension.NewFactory()
	extCfg := extFactory.CreateDefaultConfig()
	if err := agentCfg.load("extensions", "nodestate", extCfg); err != nil {
		return nil, err
	}
	extID := component.NewID(extFactory.Type())
	ext, err := extFactory.Create(ctx, extension.Settings{ID: extID, TelemetrySettings: componenttest.NewNopTelemetrySettings(),
		BuildInfo: component.NewDefaultBuildInfo()}, extCfg)
	if err != nil {
		return nil, err
	}
	w.host = extHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{extID: ext}}

	set := func(f processor.Factory) processor.Settings {
		s := processortest.NewNopSettings(f.Type())
		s.TelemetrySettings.MeterProvider = w.mp
		return s
	}
	cfgOf := func(c shipped, kind, id string, f interface{ CreateDefaultConfig() component.Config }) (component.Config, error) {
		cfg := f.CreateDefaultConfig()
		return cfg, c.load(kind, id, cfg)
	}

	// Agent, from the Kafka exporters back to the OTLP receiver.
	rl := ratelimitprocessor.NewFactory()
	rlCfg, err := cfgOf(agentCfg, "processors", "ratelimit", rl)
	if err != nil {
		return nil, err
	}
	rlTraces, err := rl.CreateTraces(ctx, set(rl), rlCfg, &w.kafkaTraces)
	if err != nil {
		return nil, err
	}
	ss := stepspanprocessor.NewFactory()
	ssCfg, err := cfgOf(agentCfg, "processors", "stepspan", ss)
	if err != nil {
		return nil, err
	}
	stepspan, err := ss.CreateTraces(ctx, set(ss), ssCfg, rlTraces)
	if err != nil {
		return nil, err
	}
	sl := steplogsconnector.NewFactory()
	slCfg, err := cfgOf(agentCfg, "connectors", "steplogs", sl)
	if err != nil {
		return nil, err
	}
	steplogs, err := sl.CreateLogsToTraces(ctx, connectortest.NewNopSettings(sl.Type()), slCfg, stepspan)
	if err != nil {
		return nil, err
	}
	logsOut := fanoutLogs{&w.kafkaLogs, steplogs}
	rlLogs, err := rl.CreateLogs(ctx, set(rl), rlCfg, logsOut)
	if err != nil {
		return nil, err
	}
	ns := nodestateprocessor.NewFactory()
	nsCfg, err := cfgOf(agentCfg, "processors", "nodestate", ns)
	if err != nil {
		return nil, err
	}
	nodeLogs, err := ns.CreateLogs(ctx, set(ns), nsCfg, rlLogs)
	if err != nil {
		return nil, err
	}
	nodeMetrics, err := ns.CreateMetrics(ctx, set(ns), nsCfg, &w.kafkaMetrics)
	if err != nil {
		return nil, err
	}
	w.ownMetrics, w.ownLogs = nodeMetrics, nodeLogs
	w.tap = &tap{nextL: nodeLogs, nextM: nodeMetrics, nextT: stepspan}
	pv := provenanceprocessor.NewFactory()
	pvCfg, err := cfgOf(agentCfg, "processors", "provenance", pv)
	if err != nil {
		return nil, err
	}
	if w.provLogs, err = pv.CreateLogs(ctx, set(pv), pvCfg, w.tap); err != nil {
		return nil, err
	}
	if w.provMetrics, err = pv.CreateMetrics(ctx, set(pv), pvCfg, w.tap); err != nil {
		return nil, err
	}
	if w.provTraces, err = pv.CreateTraces(ctx, set(pv), pvCfg, w.tap); err != nil {
		return nil, err
	}
	w.agent = []component.Component{w.provLogs, w.provMetrics, w.provTraces, nodeLogs, nodeMetrics, rlLogs, steplogs, stepspan, rlTraces, ext}

	// Gateway, from the correlator back to the Kafka receivers.
	fc := faultcorrelatorconnector.NewFactory()
	fcCfg, err := cfgOf(gatewayCfg, "connectors", "faultcorrelator", fc)
	if err != nil {
		return nil, err
	}
	cset := connectortest.NewNopSettings(fc.Type())
	corrTraces, err := fc.CreateTracesToLogs(ctx, cset, fcCfg, &w.faults)
	if err != nil {
		return nil, err
	}
	corrMetrics, err := fc.CreateMetricsToLogs(ctx, cset, fcCfg, &w.faults)
	if err != nil {
		return nil, err
	}
	corrLogs, err := fc.CreateLogsToLogs(ctx, cset, fcCfg, &w.faults)
	if err != nil {
		return nil, err
	}
	st := stragglerprocessor.NewFactory()
	stCfg, err := cfgOf(gatewayCfg, "processors", "straggler", st)
	if err != nil {
		return nil, err
	}
	straggler, err := st.CreateTraces(ctx, set(st), stCfg, corrTraces)
	if err != nil {
		return nil, err
	}
	gwRLCfg, err := cfgOf(gatewayCfg, "processors", "ratelimit", rl)
	if err != nil {
		return nil, err
	}
	gwRL, err := rl.CreateTraces(ctx, set(rl), gwRLCfg, straggler)
	if err != nil {
		return nil, err
	}
	w.gwTraces, w.gwMetrics, w.gwLogs = gwRL, corrMetrics, corrLogs
	w.gateway = []component.Component{gwRL, straggler, corrTraces, corrMetrics, corrLogs}

	// Start downstream first, as the collector does.
	for _, list := range [][]component.Component{w.gateway, w.agent} {
		for i := len(list) - 1; i >= 0; i-- {
			if err := list[i].Start(ctx, w.host); err != nil {
				_ = w.shutdown()
				return nil, fmt.Errorf("starting %T: %w", list[i], err)
			}
			w.started = append(w.started, list[i])
		}
	}
	return w, nil
}

// fanoutLogs gives a batch to each consumer in turn (none of them mutates).
type fanoutLogs []consumer.Logs

func (f fanoutLogs) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f fanoutLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	var errs []error
	for _, c := range f {
		errs = append(errs, c.ConsumeLogs(ctx, ld))
	}
	return errors.Join(errs...)
}

// scrapeOwnGPUs is the agent's GPU receiver's reading of its own GPUs,
// through its own (not the OTLP) pipeline: the inventory the provenance
// processor checks GPU claims against.
func (w *world) scrapeOwnGPUs(at time.Time) error {
	md := pmetric.NewMetrics()
	for _, uuid := range ownGPUs {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr(semconv.AttrHostName, ownHost)
		rm.Resource().Attributes().PutStr(semconv.AttrGPUUUID, uuid)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(semconv.MetricHWTemperature)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.SetDoubleValue(45)
		dp.Attributes().PutStr(semconv.AttrHWSensorLocation, semconv.SensorLocationGPU)
	}
	return w.ownMetrics.ConsumeMetrics(context.Background(), md)
}

// send gives one request to the agent's OTLP pipeline of its signal, as
// the receiver decodes it off the wire, and returns what the pipeline
// answered the sender. A request of the agent's own receivers goes to
// their pipeline instead.
func (w *world) send(r request) error {
	ctx := context.Background()
	switch {
	case r.own && r.logs != nil:
		return w.ownLogs.ConsumeLogs(ctx, *r.logs)
	case r.own && r.metrics != nil:
		return w.ownMetrics.ConsumeMetrics(ctx, *r.metrics)
	case r.logs != nil:
		b, err := plogotlp.NewExportRequestFromLogs(*r.logs).MarshalProto()
		if err != nil {
			return err
		}
		req := plogotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			return err
		}
		return w.provLogs.ConsumeLogs(ctx, req.Logs())
	case r.metrics != nil:
		b, err := pmetricotlp.NewExportRequestFromMetrics(*r.metrics).MarshalProto()
		if err != nil {
			return err
		}
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			return err
		}
		return w.provMetrics.ConsumeMetrics(ctx, req.Metrics())
	case r.traces != nil:
		b, err := ptraceotlp.NewExportRequestFromTraces(*r.traces).MarshalProto()
		if err != nil {
			return err
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			return err
		}
		return w.provTraces.ConsumeTraces(ctx, req.Traces())
	}
	return nil
}

// finishAgent shuts the agent down (the stepspan processor sends the steps
// it holds), then hands everything it wrote to Kafka to the gateway, as the
// gateway's Kafka receivers decode it, and shuts the gateway down (the
// straggler processor decides every open step): afterwards w.faults holds
// every fault record the case caused.
func (w *world) finishAgent() error {
	ctx := context.Background()
	var errs []error
	for _, c := range w.agent {
		errs = append(errs, c.Shutdown(ctx))
	}
	for _, md := range w.kafkaMetrics.AllMetrics() {
		b, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		errs = append(errs, err)
		got, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(b)
		errs = append(errs, err, w.gwMetrics.ConsumeMetrics(ctx, got))
	}
	for _, ld := range w.kafkaLogs.AllLogs() {
		b, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		errs = append(errs, err)
		got, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
		errs = append(errs, err, w.gwLogs.ConsumeLogs(ctx, got))
	}
	for _, td := range w.kafkaTraces.AllTraces() {
		b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		errs = append(errs, err)
		got, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
		errs = append(errs, err, w.gwTraces.ConsumeTraces(ctx, got))
	}
	for _, c := range w.gateway {
		errs = append(errs, c.Shutdown(ctx))
	}
	w.started = nil
	return errors.Join(errs...)
}

// shutdown stops whatever still runs, and the telemetry.
func (w *world) shutdown() error {
	var errs []error
	for i := len(w.started) - 1; i >= 0; i-- {
		errs = append(errs, w.started[i].Shutdown(context.Background()))
	}
	w.started = nil
	errs = append(errs, w.mp.Shutdown(context.Background()))
	return errors.Join(errs...)
}

// rejected is the provenance processor's counter by reason.
func (w *world) rejected() (map[string]int64, error) {
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(context.Background(), &rm); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "otelcol_processor_provenance_rejected_claims" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				return nil, fmt.Errorf("%s is not an int64 sum", m.Name)
			}
			for _, dp := range sum.DataPoints {
				v, _ := dp.Attributes.Value("reason")
				out[v.AsString()] += dp.Value
			}
		}
	}
	return out, nil
}
