package dcgmreceiver

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// seriesBudgetPerGPU is the per-GPU series budget of docs/cardinality.md:
// the Prometheus series one GPU may produce under either naming, with
// profiling fields and XID counters. Raising it is a documented decision,
// not a test fix.
var seriesBudgetPerGPU = map[string]int{
	NamingOTel:         80,
	NamingDCGMExporter: 80,
}

// TestSeriesPerGPUWithinBudget counts, in the golden files of real
// dcgm-exporter scrapes, the distinct metric name + data point attribute
// sets of every GPU (one resource each) — the series each GPU adds to
// Prometheus — and holds them to the documented budget.
func TestSeriesPerGPUWithinBudget(t *testing.T) {
	for _, naming := range []string{NamingOTel, NamingDCGMExporter} {
		paths, err := filepath.Glob(filepath.Join("testdata", "golden", "*_"+naming+".yaml"))
		require.NoError(t, err)
		require.NotEmpty(t, paths, "no golden files for naming %s", naming)
		for _, path := range paths {
			md, err := golden.ReadMetrics(path)
			require.NoError(t, err)
			perGPU := seriesPerResource(md)
			require.NotEmpty(t, perGPU, "%s: no resources", path)
			for gpu, n := range perGPU {
				t.Logf("%s %s: %d series", filepath.Base(path), gpu, n)
				require.Positive(t, n)
				require.LessOrEqual(t, n, seriesBudgetPerGPU[naming],
					"%s: GPU %s has %d series, over the budget of docs/cardinality.md", path, gpu, n)
			}
		}
	}
}

func TestSeriesPerResourceCountsHistogramBuckets(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("gpu.uuid", "GPU-a")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("g")
	gauge := g.SetEmptyGauge()
	for _, v := range []string{"x", "y", "x"} { // "x" twice: one series
		gauge.DataPoints().AppendEmpty().Attributes().PutStr("k", v)
	}
	h := ms.AppendEmpty()
	h.SetName("h")
	h.SetEmptyHistogram().DataPoints().AppendEmpty().ExplicitBounds().FromRaw([]float64{1, 2})
	// g: 2; h: 3 buckets + _sum + _count = 5.
	require.Equal(t, map[string]int{"gpu.uuid=GPU-a": 7}, seriesPerResource(md))
}

// seriesPerResource returns the Prometheus series count of each resource,
// keyed by its identifying attributes: a gauge or sum point set is one
// series, a histogram point set one per bucket (+Inf included) plus _sum
// and _count.
func seriesPerResource(md pmetric.Metrics) map[string]int {
	out := map[string]int{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		seen := map[string]int{}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					addPoints(seen, m.Name(), m.Gauge().DataPoints().Len(), func(p int) (pcommon.Map, int) {
						return m.Gauge().DataPoints().At(p).Attributes(), 1
					})
				case pmetric.MetricTypeSum:
					addPoints(seen, m.Name(), m.Sum().DataPoints().Len(), func(p int) (pcommon.Map, int) {
						return m.Sum().DataPoints().At(p).Attributes(), 1
					})
				case pmetric.MetricTypeHistogram:
					addPoints(seen, m.Name(), m.Histogram().DataPoints().Len(), func(p int) (pcommon.Map, int) {
						dp := m.Histogram().DataPoints().At(p)
						return dp.Attributes(), dp.ExplicitBounds().Len() + 1 + 2
					})
				default: // summaries and exponential histograms: not produced; count one each
					seen[m.Name()] = 1
				}
			}
		}
		n := 0
		for _, c := range seen {
			n += c
		}
		out[resourceKey(rm.Resource().Attributes())] += n
	}
	return out
}

func addPoints(seen map[string]int, name string, n int, point func(int) (pcommon.Map, int)) {
	for p := 0; p < n; p++ {
		attrs, series := point(p)
		seen[name+"{"+attrKey(attrs)+"}"] = series
	}
}

// resourceKey names a GPU by the attributes that identify it under either
// naming; other resources by all their attributes.
func resourceKey(attrs pcommon.Map) string {
	for _, k := range []string{"gpu.uuid", "UUID"} {
		if v, ok := attrs.Get(k); ok {
			return k + "=" + v.AsString()
		}
	}
	return attrKey(attrs)
}

func attrKey(attrs pcommon.Map) string {
	kv := make([]string, 0, attrs.Len())
	attrs.Range(func(k string, v pcommon.Value) bool {
		kv = append(kv, k+"="+v.AsString())
		return true
	})
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
