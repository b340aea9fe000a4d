package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

// metricBusBandwidth is read by no other component; the receiver's other
// metric names are in internal/semconv (docs/semconv.md).
const metricBusBandwidth = semconv.MetricNCCLCollectiveBusBandwidth

// durationBounds are the histogram's bucket bounds in seconds: collectives
// run from microseconds (small all-reduces) to the watchdog's minutes.
var durationBounds = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600}

// seriesKey is one (job, attempt, rank, collective, process group) series.
type seriesKey struct {
	// job and attempt: the resource; two jobs on one node have a rank 0 each.
	job        string
	attempt    int64
	hasAttempt bool
	rank       int
	collective string
	pg         string
}

type histogram struct {
	counts []uint64
	count  uint64
	sum    float64
}

func (h *histogram) observe(seconds float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(durationBounds)+1)
	}
	i := sort.SearchFloat64s(durationBounds, seconds)
	h.counts[i]++
	h.count++
	h.sum += seconds
}

// collectiveMetrics accumulates cumulative metrics of what was emitted:
// duration histograms, the latest bus bandwidth, and counts of incomplete
// and timed-out collectives. The receiver's loop owns it.
type collectiveMetrics struct {
	start      pcommon.Timestamp
	durations  map[seriesKey]*histogram
	busBW      map[seriesKey]float64 // GB/s, latest
	incomplete map[seriesKey]int64
	timedOut   map[seriesKey]int64
	dirty      bool
}

func newCollectiveMetrics(start time.Time) *collectiveMetrics {
	return &collectiveMetrics{
		start:      pcommon.NewTimestampFromTime(start),
		durations:  map[seriesKey]*histogram{},
		busBW:      map[seriesKey]float64{},
		incomplete: map[seriesKey]int64{},
		timedOut:   map[seriesKey]int64{},
	}
}

func (m *collectiveMetrics) duration(k seriesKey, d time.Duration) {
	h := m.durations[k]
	if h == nil {
		h = &histogram{}
		m.durations[k] = h
	}
	h.observe(d.Seconds())
	m.dirty = true
}

func (m *collectiveMetrics) bandwidth(k seriesKey, gbs float64) {
	m.busBW[k] = gbs
	m.dirty = true
}

func (m *collectiveMetrics) notCompleted(k seriesKey, timedOut bool) {
	if timedOut {
		m.timedOut[k]++
	} else {
		m.incomplete[k]++
	}
	m.dirty = true
}

// build returns the current values, one resource per rank, or false when
// nothing changed since the last call.
func (m *collectiveMetrics) build(host, version string, now time.Time) (pmetric.Metrics, bool) {
	if !m.dirty {
		return pmetric.Metrics{}, false
	}
	m.dirty = false
	ts := pcommon.NewTimestampFromTime(now)
	md := pmetric.NewMetrics()
	byRank := map[seriesKey]pmetric.MetricSlice{}
	metricsOf := map[seriesKey]map[string]pmetric.Metric{}
	get := func(k seriesKey, name string, setup func(pmetric.Metric)) pmetric.Metric {
		rank := seriesKey{job: k.job, attempt: k.attempt, hasAttempt: k.hasAttempt, rank: k.rank} // the resource
		ms, ok := byRank[rank]
		if !ok {
			rm := md.ResourceMetrics().AppendEmpty()
			rankResource{host: host, job: k.job, attempt: k.attempt, hasAttempt: k.hasAttempt, rank: k.rank}.putTo(rm.Resource().Attributes())
			sm := rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(metadata.ScopeName)
			sm.Scope().SetVersion(version)
			ms = sm.Metrics()
			byRank[rank] = ms
			metricsOf[rank] = map[string]pmetric.Metric{}
		}
		if met, ok := metricsOf[rank][name]; ok {
			return met
		}
		met := ms.AppendEmpty()
		met.SetName(name)
		setup(met)
		metricsOf[rank][name] = met
		return met
	}
	attrs := func(a pcommon.Map, k seriesKey) {
		a.PutStr(semconv.AttrNCCLCollective, k.collective)
		a.PutStr(semconv.AttrNCCLPGName, k.pg)
	}
	for _, k := range sortedKeys(m.durations) {
		h := m.durations[k]
		met := get(k, semconv.MetricNCCLCollectiveDuration, func(met pmetric.Metric) {
			met.SetDescription("Duration of collectives (CUDA events or the inspector's timing).")
			met.SetUnit("s")
			met.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		})
		dp := met.Histogram().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(m.start)
		dp.SetTimestamp(ts)
		dp.SetCount(h.count)
		dp.SetSum(h.sum)
		dp.ExplicitBounds().FromRaw(durationBounds)
		dp.BucketCounts().FromRaw(h.counts)
		attrs(dp.Attributes(), k)
	}
	for _, k := range sortedKeys(m.busBW) {
		met := get(k, metricBusBandwidth, func(met pmetric.Metric) {
			met.SetDescription("Bus bandwidth of the latest collective, as NCCL's inspector computes it.")
			met.SetUnit("By/s")
			met.SetEmptyGauge()
		})
		dp := met.Gauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(m.busBW[k] * 1e9)
		attrs(dp.Attributes(), k)
	}
	for name, counts := range map[string]map[seriesKey]int64{semconv.MetricNCCLCollectivesIncomplete: m.incomplete, semconv.MetricNCCLCollectivesTimedOut: m.timedOut} {
		for _, k := range sortedKeys(counts) {
			met := get(k, name, func(met pmetric.Metric) {
				met.SetDescription("Collectives a dump showed not completed (incomplete) or retired by the watchdog (timed_out).")
				met.SetUnit("{collective}")
				sum := met.SetEmptySum()
				sum.SetIsMonotonic(true)
				sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			})
			dp := met.Sum().DataPoints().AppendEmpty()
			dp.SetStartTimestamp(m.start)
			dp.SetTimestamp(ts)
			dp.SetIntValue(counts[k])
			attrs(dp.Attributes(), k)
		}
	}
	return md, true
}

func sortedKeys[V any](m map[seriesKey]V) []seriesKey {
	keys := make([]seriesKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.job != b.job {
			return a.job < b.job
		}
		if a.attempt != b.attempt {
			return a.attempt < b.attempt
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.pg != b.pg {
			return a.pg < b.pg
		}
		return a.collective < b.collective
	})
	return keys
}
