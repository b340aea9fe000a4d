package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/xid"
)

// dcgm-exporter's label names, kept under naming: dcgm_exporter so that
// dashboards built on dcgm-exporter (Grafana 12239) work unchanged.
const (
	labelGPU           = "gpu"
	labelUUID          = "UUID"
	labelPCIBusID      = "pci_bus_id"
	labelDevice        = "device"
	labelModelName     = "modelName"
	labelHostname      = "Hostname"
	labelDriverVersion = "DCGM_FI_DRIVER_VERSION"
	labelMIGProfile    = "GPU_I_PROFILE"
	labelMIGInstance   = "GPU_I_ID"
	labelPod           = "pod"
	labelNamespace     = "namespace"
	labelContainer     = "container"
	labelXID           = "xid"
	// on DCGM_FI_DEV_XID_ERRORS: the last XID's code and dcgm-exporter's text for it
	labelXIDErrCode = "err_code"
	labelXIDErrMsg  = "err_msg"

	// dcgm-exporter's own metric for the count of each XID per GPU.
	dcgmExporterXIDCount = "DCGM_EXP_XID_ERRORS_COUNT"
	// OpenTelemetry's k8s.pod.label.<key> resource attributes, under otel
	// naming, of attribution::kubernetes::pod_labels.
	otelPodLabelPrefix = "k8s.pod.label."

	// This project's metric for a GPU whose driver calls hang.
	dcgmExporterUnresponsive = "DCGM_EXP_GPU_UNRESPONSIVE"
)

// counterKey identifies one cumulative series of one GPU.
type counterKey struct {
	gpu   string // UUID, with the MIG ids for an instance
	field model.FieldID
}

type counterState struct {
	last  float64
	start pcommon.Timestamp
}

// metricsBuilder turns snapshots into pdata. It keeps the start time of
// every cumulative series, so a counter that goes down (a driver reload, a
// GPU reset) starts a new series instead of reporting a negative delta.
// Not safe for concurrent use: the receiver's collection loop owns it.
type metricsBuilder struct {
	naming    string
	hostName  string
	version   string
	startTime pcommon.Timestamp
	lastTime  pcommon.Timestamp
	counters  map[counterKey]counterState
	fields    *fieldSet
	// podLabels returns the labels of a pod; nil when pod labels are off.
	podLabels func(namespace, name string) []podlabels.Label
}

func newMetricsBuilder(naming, hostName, version string, start pcommon.Timestamp) *metricsBuilder {
	return &metricsBuilder{
		naming:    naming,
		hostName:  hostName,
		version:   version,
		startTime: start,
		counters:  map[counterKey]counterState{},
		fields:    catalogueFields,
	}
}

// gpuKey names a GPU or MIG instance in the builder's state.
func gpuKey(g model.GPU) string {
	if g.MIG == nil {
		return g.UUID
	}
	return g.UUID + "/" + strconv.Itoa(g.MIG.GPUInstanceID) + "/" + strconv.Itoa(g.MIG.ComputeInstanceID)
}

// cumulativeStart returns the start time of a cumulative series whose value
// is now v.
func (b *metricsBuilder) cumulativeStart(k counterKey, v float64, now pcommon.Timestamp) pcommon.Timestamp {
	st, ok := b.counters[k]
	start := b.startTime
	if b.lastTime != 0 {
		start = b.lastTime
	}
	if ok && v >= st.last {
		start = st.start
	}
	b.counters[k] = counterState{last: v, start: start}
	return start
}

// build turns one snapshot into metrics. xidCounts holds each GPU's count of
// every XID code seen since the receiver started; unresponsive GPUs are
// reported as such.
func (b *metricsBuilder) build(snap model.Snapshot, owner func(model.GPUSample) model.Owner, xidCounts map[string]map[int]int64) pmetric.Metrics {
	now := pcommon.NewTimestampFromTime(snap.Time)
	md := pmetric.NewMetrics()
	md.ResourceMetrics().EnsureCapacity(len(snap.GPUs))
	for i := range snap.GPUs {
		s := &snap.GPUs[i]
		rm := md.ResourceMetrics().AppendEmpty()
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(metadata.ScopeName)
		sm.Scope().SetVersion(b.version)
		o := owner(*s)
		if b.naming == NamingDCGMExporter {
			b.buildDCGMExporter(rm, sm.Metrics(), s, o, xidCounts[gpuKey(s.GPU)], now)
		} else {
			b.buildOTel(rm, sm.Metrics(), s, o, xidCounts[gpuKey(s.GPU)], now)
		}
	}
	b.lastTime = now
	return md
}

// otelMetrics creates each OTel metric once per GPU, on first use.
type otelMetrics struct {
	ms    pmetric.MetricSlice
	byKey map[string]pmetric.NumberDataPointSlice
}

// pointsPerMetric is how many data points each OTel metric can have for one
// GPU (fields sharing it, the throttle reasons), so that its slice is
// allocated once instead of growing point by point.
var pointsPerMetric = func() map[string]int {
	n := map[string]int{semconv.MetricGPUClockThrottle: len(model.ThrottleReasons)}
	for _, f := range model.Catalogue {
		if f.Kind != model.Label && f.ID != model.FieldClocksEventReasons {
			n[f.OTel]++
		}
	}
	return n
}()

// otelDescriptions is the description of each OTel metric: the help text of
// the first catalogue field that feeds it, so that a metric fed by several
// fields (hw.temperature by the GPU and the memory sensor) is described the
// same way whichever field a source reads first.
var otelDescriptions = func() map[string]string {
	d := map[string]string{}
	for _, f := range model.Catalogue {
		if _, ok := d[f.OTel]; !ok && f.Kind != model.Label && f.OTel != "" {
			d[f.OTel] = f.Help
		}
	}
	return d
}()

func (m *otelMetrics) points(name, desc, unit string, counter bool) pmetric.NumberDataPointSlice {
	if dps, ok := m.byKey[name]; ok {
		return dps
	}
	met := m.ms.AppendEmpty()
	met.SetName(name)
	met.SetDescription(desc)
	met.SetUnit(unit)
	var dps pmetric.NumberDataPointSlice
	if counter {
		sum := met.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dps = sum.DataPoints()
	} else {
		dps = met.SetEmptyGauge().DataPoints()
	}
	dps.EnsureCapacity(pointsPerMetric[name])
	m.byKey[name] = dps
	return dps
}

func (b *metricsBuilder) buildOTel(rm pmetric.ResourceMetrics, ms pmetric.MetricSlice, s *model.GPUSample, o model.Owner, xids map[int]int64, now pcommon.Timestamp) {
	g := s.GPU
	b.putOTelResource(rm.Resource().Attributes(), g, o)

	ms.EnsureCapacity(len(pointsPerMetric) + 2)
	om := &otelMetrics{ms: ms, byKey: make(map[string]pmetric.NumberDataPointSlice, len(pointsPerMetric)+2)}
	gk := gpuKey(g)
	for _, v := range s.Values {
		f, ts, ok := b.measurement(v, now)
		if !ok {
			continue
		}
		if f.ID == model.FieldClocksEventReasons {
			b.throttleReasons(om, v, ts)
			continue
		}
		dp := om.points(f.OTel, otelDescriptions[f.OTel], f.Unit, f.Kind == model.Counter).AppendEmpty()
		dp.SetTimestamp(ts)
		if f.AttrKey != "" {
			dp.Attributes().PutStr(f.AttrKey, f.AttrValue)
		}
		if f.Scale == 1 && !v.IsFloat {
			dp.SetIntValue(v.Int)
		} else {
			dp.SetDoubleValue(v.AsFloat() * f.Scale)
		}
		if f.Kind == model.Counter {
			dp.SetStartTimestamp(b.cumulativeStart(counterKey{gpu: gk, field: f.ID}, v.AsFloat(), ts))
		}
	}
	for code, n := range xids {
		dp := om.points(semconv.MetricGPUXIDErrors, "XID errors seen on the GPU since the receiver started, by XID code.", "{error}", true).AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetStartTimestamp(b.startTime)
		dp.SetIntValue(n)
		dp.Attributes().PutInt(semconv.AttrGPUXID, int64(code))
	}
	dp := om.points(semconv.MetricGPUUnresponsive, "1 while a driver call for the GPU does not return within call_timeout.", "", false).AppendEmpty()
	dp.SetTimestamp(now)
	dp.SetIntValue(boolInt(s.Unresponsive))
}

// putOTelResource writes a GPU's resource attributes under naming otel.
func (b *metricsBuilder) putOTelResource(res pcommon.Map, g model.GPU, o model.Owner) {
	putNonEmpty(res, semconv.AttrHostName, b.hostName)
	putNonEmpty(res, semconv.AttrGPUUUID, g.UUID)
	res.PutInt(semconv.AttrGPUIndex, int64(g.Index))
	putNonEmpty(res, semconv.AttrGPUModel, g.Model)
	putNonEmpty(res, semconv.AttrGPUPCIBusID, g.PCIBusID)
	putNonEmpty(res, semconv.AttrGPUDevice, g.Device)
	putNonEmpty(res, semconv.AttrGPUDriverVersion, g.DriverVersion)
	if g.MIG != nil {
		res.PutInt(semconv.AttrGPUMIGInstanceID, int64(g.MIG.GPUInstanceID))
		res.PutInt(semconv.AttrGPUMIGComputeID, int64(g.MIG.ComputeInstanceID))
		putNonEmpty(res, semconv.AttrGPUMIGProfile, g.MIG.Profile)
	}
	putOwner(res, o, semconv.AttrK8sPodName, semconv.AttrK8sNamespaceName, semconv.AttrK8sContainerName)
	if b.podLabels != nil && o.PodName != "" {
		for _, l := range b.podLabels(o.Namespace, o.PodName) {
			res.PutStr(otelPodLabelPrefix+l.Key, l.Value)
		}
	}
	putNonEmpty(res, semconv.AttrSlurmJobID, o.SlurmJobID)
	putNonEmpty(res, semconv.AttrTrainingJobID, o.TrainingJobID)
}

// throttleReasons turns the clock-event bitmask into one 0/1 series per
// reason, so PromQL can select a reason without bit arithmetic.
func (b *metricsBuilder) throttleReasons(om *otelMetrics, v model.Value, ts pcommon.Timestamp) {
	mask := uint64(v.AsFloat())
	dps := om.points(semconv.MetricGPUClockThrottle, "1 while the clocks are held down for the reason in gpu.throttle.reason.", "", false)
	for _, r := range model.ThrottleReasons {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.Attributes().PutStr(semconv.AttrGPUThrottleReason, r.Name)
		dp.SetIntValue(boolInt(mask&r.Bit != 0))
	}
}

// buildDCGMExporter writes dcgm-exporter's names and labels. The labels are
// the GPU's resource attributes (one resource per GPU, as in otel naming);
// remote write with resource_constant_labels turns them into the labels
// dashboards filter on, and no data point carries a copy of them.
func (b *metricsBuilder) buildDCGMExporter(rm pmetric.ResourceMetrics, ms pmetric.MetricSlice, s *model.GPUSample, o model.Owner, xids map[int]int64, now pcommon.Timestamp) {
	g := s.GPU
	labels := rm.Resource().Attributes()
	labels.EnsureCapacity(16)
	// service.instance.id becomes the instance label after remote write.
	labels.PutStr(semconv.AttrServiceName, "dcgm-exporter")
	putNonEmpty(labels, semconv.AttrServiceInstanceID, b.hostName)
	labels.PutStr(labelGPU, strconv.Itoa(g.Index))
	labels.PutStr(labelUUID, g.UUID)
	putNonEmpty(labels, labelPCIBusID, g.PCIBusID)
	putNonEmpty(labels, labelDevice, g.Device)
	putNonEmpty(labels, labelModelName, g.Model)
	putNonEmpty(labels, labelHostname, b.hostName)
	if g.MIG != nil {
		putNonEmpty(labels, labelMIGProfile, g.MIG.Profile)
		labels.PutStr(labelMIGInstance, strconv.Itoa(g.MIG.GPUInstanceID))
	}
	putOwner(labels, o, labelPod, labelNamespace, labelContainer)
	if b.fields.driverVersionLabel {
		putNonEmpty(labels, labelDriverVersion, g.DriverVersion)
	}
	// The pod's labels, named as dcgm-exporter names them; one whose name
	// is taken by a label above (a pod label "gpu" or "pod") is left out.
	if b.podLabels != nil && o.PodName != "" {
		for _, l := range b.podLabels(o.Namespace, o.PodName) {
			if _, taken := labels.Get(l.Name); !taken {
				labels.PutStr(l.Name, l.Value)
			}
		}
	}

	gk := gpuKey(g)
	ms.EnsureCapacity(len(s.Values) + 2)
	for _, v := range s.Values {
		f, ts, ok := b.measurement(v, now)
		if !ok {
			continue
		}
		m := ms.AppendEmpty()
		m.SetName(f.Name)
		m.SetDescription(f.Help)
		var dp pmetric.NumberDataPoint
		if f.Kind == model.Counter {
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp = sum.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(b.cumulativeStart(counterKey{gpu: gk, field: f.ID}, v.AsFloat(), ts))
		} else {
			dp = m.SetEmptyGauge().DataPoints().AppendEmpty()
		}
		dp.SetTimestamp(ts)
		if v.IsFloat {
			dp.SetDoubleValue(v.Float)
		} else {
			dp.SetIntValue(v.Int)
		}
		if f.ID == model.FieldXIDErrors {
			// dcgm-exporter labels the last XID with its code and text
			code := v.Int
			if v.IsFloat {
				code = int64(v.Float)
			}
			dp.Attributes().PutStr(labelXIDErrCode, strconv.FormatInt(code, 10))
			dp.Attributes().PutStr(labelXIDErrMsg, xid.ExporterMessage(code))
		}
	}
	if len(xids) > 0 && b.fields.xidCount {
		m := ms.AppendEmpty()
		m.SetName(dcgmExporterXIDCount)
		m.SetDescription("Count of XID errors since the exporter started, by XID code.")
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for code, n := range xids {
			dp := sum.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(b.startTime)
			dp.SetTimestamp(now)
			dp.Attributes().PutStr(labelXID, strconv.Itoa(code))
			dp.SetIntValue(n)
		}
	}
	m := ms.AppendEmpty()
	m.SetName(dcgmExporterUnresponsive)
	m.SetDescription("1 while a driver call for the GPU does not return within call_timeout.")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(now)
	dp.SetIntValue(boolInt(s.Unresponsive))
}

// measurement returns the field and timestamp of a value that becomes a
// data point; ok is false for unknown fields, labels and sentinels.
func (b *metricsBuilder) measurement(v model.Value, now pcommon.Timestamp) (f *model.Field, ts pcommon.Timestamp, ok bool) {
	f, ok = b.fields.byID[v.Field]
	if !ok || f.Kind == model.Label || isSentinel(v) {
		return nil, 0, false
	}
	if v.Time.IsZero() {
		return f, now, true
	}
	return f, pcommon.NewTimestampFromTime(v.Time), true
}

// isSentinel is a last line of defence: sources already drop DCGM's blank
// and not-supported values, and none may ever leave the receiver.
func isSentinel(v model.Value) bool {
	if v.IsFloat {
		return model.IsBlankFloat64(v.Float) || math.IsInf(v.Float, 0)
	}
	return model.IsBlankInt64(v.Int)
}

func putNonEmpty(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}

func putOwner(m pcommon.Map, o model.Owner, podKey, nsKey, containerKey string) {
	putNonEmpty(m, podKey, o.PodName)
	putNonEmpty(m, nsKey, o.Namespace)
	putNonEmpty(m, containerKey, o.Container)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
