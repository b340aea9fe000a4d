package provenanceprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

// reason indexes what a claim was renamed for.
type reason int

const (
	reasonHost reason = iota
	reasonGPU
	reasonHardware
	reasonFault
	numReasons
)

var reasonNames = [numReasons]string{
	metadata.ReasonHostName, metadata.ReasonGPU, metadata.ReasonHardwareSignal, metadata.ReasonFaultAttribute,
}

// forged is the prefix of every renamed claim, the one internal/fault uses.
const forged = fault.ForgedPrefix

// walker rewrites one batch; counts are its rejections by reason. It holds
// no state between batches, so instances need no lock.
type walker struct {
	host   string
	inv    nodestate.Inventory
	counts [numReasons]int
	// example is the first claim of each reason, for the one log line.
	example [numReasons]string
	// gpuCount caches inv.GPUCount() for the batch (-1: not read yet).
	gpuCount int
	// keys is the scratch list of one map's keys to rename.
	keys [8]renaming
	// judged caches the batch's inventory answers: a batch names a few
	// GPUs many times, and each lookup takes the store's lock.
	judged  [8]judgedGPU
	nJudged int
	// bind: bind_to_auth, host is the request's authenticated node; own:
	// the resource being walked is that node's own (bind.go), whose
	// claims other than host.name stand.
	bind, own bool
}

type judgedGPU struct {
	uuid  string
	known bool
}

// knownGPU asks the inventory once per uuid and batch (the first 8).
func (w *walker) knownGPU(uuid string) bool {
	if w.inv == nil {
		return false
	}
	for i := range w.nJudged {
		if w.judged[i].uuid == uuid {
			return w.judged[i].known
		}
	}
	known := w.inv.HasGPU(uuid)
	if w.nJudged < len(w.judged) {
		w.judged[w.nJudged] = judgedGPU{uuid: uuid, known: known}
		w.nJudged++
	}
	return known
}

type renaming struct {
	key string
	why reason
}

func (w *walker) reject(r reason, what string) {
	if w.counts[r] == 0 {
		w.example[r] = clip(what)
	}
	w.counts[r]++
}

// maxExample bounds the sender's text that reaches the log.
const maxExample = 200

func clip(s string) string {
	if len(s) <= maxExample {
		return s
	}
	return s[:maxExample] + "..."
}

// resource stamps the node's host name on a resource and checks the rest.
func (w *walker) resource(res pcommon.Resource) {
	if w.bind && w.ownResource(res) {
		return
	}
	attrs := res.Attributes()
	if v, ok := attrs.Get(semconv.AttrHostName); ok {
		if v.Type() != pcommon.ValueTypeStr || v.Str() != w.host {
			if claim := v.AsString(); claim != "" {
				w.reject(reasonHost, claim)
				// v points into the map's storage, which PutEmpty may
				// move: copy it out first.
				held := pcommon.NewValueEmpty()
				v.CopyTo(held)
				held.CopyTo(attrs.PutEmpty(forged + semconv.AttrHostName))
			}
			attrs.PutStr(semconv.AttrHostName, w.host)
		}
	} else {
		attrs.PutStr(semconv.AttrHostName, w.host)
	}
	w.attrs(attrs, true)
}

// attrs renames the claims of one attribute map. On a resource host.name
// was stamped already and is skipped.
func (w *walker) attrs(m pcommon.Map, isResource bool) {
	pending := w.keys[:0]
	for k, v := range m.All() {
		why, bad := w.judge(k, v, isResource)
		if bad {
			pending = append(pending, renaming{key: k, why: why})
		}
	}
	for _, r := range pending {
		v, _ := m.Get(r.key)
		if w.counts[r.why] == 0 {
			w.example[r.why] = clip(r.key + "=" + v.AsString())
		}
		w.counts[r.why]++
		// The value points into the map's storage, which Remove and
		// PutEmpty rearrange: copy it out first.
		held := pcommon.NewValueEmpty()
		v.CopyTo(held)
		m.Remove(r.key)
		held.CopyTo(m.PutEmpty(forged + r.key))
	}
}

// judge says whether key k with value v is a claim to rename, and why.
func (w *walker) judge(k string, v pcommon.Value, isResource bool) (reason, bool) {
	if w.own && k != semconv.AttrHostName {
		return 0, false
	}
	switch k {
	case semconv.AttrHostName:
		if isResource {
			return 0, false
		}
		return reasonHost, v.Type() != pcommon.ValueTypeStr || v.Str() != w.host
	case semconv.AttrGPUUUID:
		return reasonGPU, v.Type() != pcommon.ValueTypeStr || !w.knownGPU(v.Str())
	case semconv.AttrGPUIndex:
		return reasonGPU, !w.knownIndex(v)
	case semconv.AttrEventName:
		return reasonHardware, v.Type() == pcommon.ValueTypeStr && semconv.HardwareSignal(v.Str())
	}
	// A name Prometheus would store as a hardware signal's or as
	// host.name's (gpu_ecc_errors, host_name) is renamed as one.
	return reasonHardware, semconv.HardwareSignal(k) || semconv.PrometheusAlias(k)
}

// knownIndex: an index of one of the node's GPUs, 0 to GPUCount()-1, as an
// int, an integral double or its decimal text.
func (w *walker) knownIndex(v pcommon.Value) bool {
	if w.inv == nil {
		return false
	}
	var i int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		i = v.Int()
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != math.Trunc(d) || d < 0 || d > math.MaxInt32 {
			return false
		}
		i = int64(d)
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		if err != nil {
			return false
		}
		i = n
	default:
		return false
	}
	if w.gpuCount < 0 {
		w.gpuCount = w.inv.GPUCount()
	}
	return i >= 0 && i < int64(w.gpuCount)
}

// name renames a metric name or a log record's event name that is a
// hardware signal; it returns the name to keep.
func (w *walker) name(n string) (string, bool) {
	if w.own || (!semconv.HardwareSignal(n) && !semconv.PrometheusAlias(n)) {
		return n, false
	}
	w.reject(reasonHardware, n)
	return forged + n, true
}

func (w *walker) logs(ld plog.Logs) {
	w.gpuCount = -1
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		w.resource(rl.Resource())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			w.attrs(sl.Scope().Attributes(), false)
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				w.attrs(lr.Attributes(), false)
				if n, renamed := w.name(lr.EventName()); renamed {
					lr.SetEventName(n)
				}
			}
		}
	}
}

func (w *walker) traces(td ptrace.Traces) {
	w.gpuCount = -1
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		w.resource(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			w.attrs(ss.Scope().Attributes(), false)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				w.attrs(sp.Attributes(), false)
				for e := 0; e < sp.Events().Len(); e++ {
					w.attrs(sp.Events().At(e).Attributes(), false)
				}
				for l := 0; l < sp.Links().Len(); l++ {
					w.attrs(sp.Links().At(l).Attributes(), false)
				}
			}
		}
	}
}

func (w *walker) metrics(md pmetric.Metrics) {
	w.gpuCount = -1
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		w.resource(rm.Resource())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			w.attrs(sm.Scope().Attributes(), false)
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if n, renamed := w.name(m.Name()); renamed {
					m.SetName(n)
				}
				w.metric(m)
			}
		}
	}
}

func (w *walker) metric(m pmetric.Metric) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		w.numberPoints(m.Gauge().DataPoints())
	case pmetric.MetricTypeSum:
		w.numberPoints(m.Sum().DataPoints())
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			w.attrs(dps.At(i).Attributes(), false)
			w.exemplars(dps.At(i).Exemplars())
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			w.attrs(dps.At(i).Attributes(), false)
			w.exemplars(dps.At(i).Exemplars())
		}
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			w.attrs(dps.At(i).Attributes(), false)
		}
	}
}

func (w *walker) numberPoints(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		w.attrs(dps.At(i).Attributes(), false)
		w.exemplars(dps.At(i).Exemplars())
	}
}

func (w *walker) exemplars(es pmetric.ExemplarSlice) {
	for i := 0; i < es.Len(); i++ {
		w.attrs(es.At(i).FilteredAttributes(), false)
	}
}
