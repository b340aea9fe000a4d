package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// jobMetrics are the metrics of one job's resource; every attempt of the
// job adds its data points.
type jobMetrics struct {
	job                       string // "" before the first resource
	scope                     pmetric.ScopeMetrics
	duration                  pmetric.HistogramDataPointSlice
	tokensRate, dataloadShare pmetric.NumberDataPointSlice
	mfu                       pmetric.NumberDataPointSlice
}

func (c *stepMetrics) newJobMetrics(md pmetric.Metrics, job string) jobMetrics {
	rm := md.ResourceMetrics().AppendEmpty()
	// The job alone, no host.name: the metrics describe the whole job,
	// whichever gateway computed them.
	rm.Resource().Attributes().PutStr(semconv.AttrTrainingJobID, job)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	sm.Scope().SetVersion(c.version)
	ms := sm.Metrics()

	d := ms.AppendEmpty()
	d.SetName(semconv.MetricTrainingStepDuration)
	d.SetDescription("Duration of the job's steps: for each step, the longest of its ranks' train.step spans.")
	d.SetUnit("s")
	h := d.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)

	gauge := func(name, desc, unit string) pmetric.NumberDataPointSlice {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetDescription(desc)
		m.SetUnit(unit)
		return m.SetEmptyGauge().DataPoints()
	}
	return jobMetrics{
		job:      job,
		scope:    sm,
		duration: h.DataPoints(),
		tokensRate: gauge(semconv.MetricTrainingTokensRate,
			"Tokens per second of the job over the steps closed in the interval: Σ tokens of all ranks / Σ step durations.", "{token}/s"),
		dataloadShare: gauge(semconv.MetricTrainingDataloadShare,
			"Share of the step spent loading data, averaged over ranks, then over the steps closed in the interval.", "1"),
		mfu: gauge(semconv.MetricTrainingMFU,
			"Model FLOPs utilisation over the steps closed in the interval: achieved FLOP/s per GPU / the GPU's dense BF16 peak.", "1"),
	}
}

// dropEmpty removes the metrics without data points (gauges of an interval
// in which no step closed).
func (m jobMetrics) dropEmpty() {
	if m.job == "" {
		return
	}
	m.scope.Metrics().RemoveIf(func(metric pmetric.Metric) bool {
		switch metric.Type() {
		case pmetric.MetricTypeHistogram:
			return metric.Histogram().DataPoints().Len() == 0
		case pmetric.MetricTypeGauge:
			return metric.Gauge().DataPoints().Len() == 0
		}
		return false
	})
}

// collect closes the steps that are due and builds one resource per job,
// in job then attempt order, for the job attempts updated since the last
// emission. Job attempts idle for job_expiry are forgotten. The caller
// holds mu.
func (c *stepMetrics) collect(now time.Time, final bool) pmetric.Metrics {
	keys := make([]jobKey, 0, len(c.jobs))
	for k := range c.jobs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		return keys[a].job < keys[b].job || keys[a].job == keys[b].job && keys[a].attempt < keys[b].attempt
	})
	md := pmetric.NewMetrics()
	var cur jobMetrics // the resource being filled
	for _, k := range keys {
		j := c.jobs[k]
		j.closeDue(now, c.cfg.StepTimeout, final, c.bounds, c.closedFn)
		if j.updated {
			if cur.job != k.job {
				cur.dropEmpty()
				cur = c.newJobMetrics(md, k.job)
			}
			c.appendPoints(cur, k, j, now)
			j.win, j.updated = window{}, false
		}
		if len(j.open) == 0 && now.Sub(j.lastSeen) >= c.cfg.JobExpiry {
			delete(c.jobs, k)
		}
	}
	cur.dropEmpty()
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		return rm.ScopeMetrics().At(0).Metrics().Len() == 0
	})
	return md
}

func (c *stepMetrics) appendPoints(m jobMetrics, k jobKey, j *jobState, now time.Time) {
	ts := pcommon.NewTimestampFromTime(now)
	attrs := func(a pcommon.Map) {
		// The job id on the points too: Prometheus keeps resource
		// attributes out of the series' labels.
		a.PutStr(semconv.AttrTrainingJobID, k.job)
		a.PutInt(semconv.AttrTrainingAttempt, k.attempt)
	}
	if j.hist.count > 0 {
		dp := m.duration.AppendEmpty()
		attrs(dp.Attributes())
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(j.start))
		dp.SetTimestamp(ts)
		dp.SetCount(j.hist.count)
		dp.SetSum(j.hist.sum)
		dp.SetMin(j.hist.min)
		dp.SetMax(j.hist.max)
		dp.ExplicitBounds().FromRaw(c.bounds)
		dp.BucketCounts().FromRaw(j.hist.counts)
	}
	gauge := func(dps pmetric.NumberDataPointSlice, value func() (float64, bool)) {
		v, ok := value()
		if !ok {
			return
		}
		dp := dps.AppendEmpty()
		attrs(dp.Attributes())
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(v)
	}
	gauge(m.tokensRate, j.win.tokensRate)
	gauge(m.dataloadShare, j.win.dataloadShare)
	gauge(m.mfu, j.win.mfu)
}
