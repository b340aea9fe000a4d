package metadatatest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// fakeMetrics emits what testdata/fake.yaml documents; change edits it.
func fakeMetrics(change func(requests, temperature pmetric.Metric)) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("example.com/fakereceiver")
	ms := sm.Metrics()
	r := ms.AppendEmpty()
	r.SetName("fake.requests")
	r.SetDescription("Requests served.")
	r.SetUnit("{request}")
	sum := r.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	temp := ms.AppendEmpty()
	temp.SetName("fake.temperature")
	temp.SetDescription("Temperature now.")
	temp.SetUnit("Cel")
	temp.SetEmptyGauge()
	if change != nil {
		change(r, temp)
	}
	return md
}

func TestCheckMetrics(t *testing.T) {
	md := readFake(t)
	assert.Empty(t, checkMetrics(md, []pmetric.Metrics{fakeMetrics(nil)}))

	assert.Equal(t, problems{
		`metrics.fake.requests description: metadata.yaml has "Requests served.", the code "Requests."`,
		`metrics.fake.requests monotonic: metadata.yaml has true, the code false`,
		`metrics.fake.requests aggregation_temporality: metadata.yaml has "cumulative", the code "delta"`,
		`metrics.fake.temperature unit: metadata.yaml has "Cel", the code "K"`,
		`metrics.fake.temperature type: metadata.yaml has "Gauge", the code "Sum"`,
	}, checkMetrics(md, []pmetric.Metrics{fakeMetrics(func(r, temp pmetric.Metric) {
		r.SetDescription("Requests.")
		r.Sum().SetIsMonotonic(false)
		r.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		temp.SetUnit("K")
		temp.SetEmptySum()
	})}))
}

func TestCheckMetricsNames(t *testing.T) {
	md := readFake(t)
	assert.Equal(t, problems{
		"metrics lists fake.temperature, which the component never emits",
		"the component emits fake.other, which metrics does not list",
	}, checkMetrics(md, []pmetric.Metrics{fakeMetrics(func(_, temp pmetric.Metric) { temp.SetName("fake.other") })}))

	// No metrics at all: every documented one is missing.
	assert.Len(t, checkMetrics(md, nil), 2)
}

// One name with two descriptions (two code paths that disagree) is
// reported even when metadata.yaml matches one of them.
func TestCheckMetricsEmittedTwoWays(t *testing.T) {
	md := readFake(t)
	ps := checkMetrics(md, []pmetric.Metrics{
		fakeMetrics(nil),
		fakeMetrics(func(r, _ pmetric.Metric) { r.SetDescription("Other.") }),
	})
	assert.Len(t, ps, 1)
	assert.Contains(t, ps[0], "metric fake.requests is emitted two ways")
}

func TestCheckMetricsScope(t *testing.T) {
	md := readFake(t)
	m := fakeMetrics(nil)
	m.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().SetName("example.com/other")
	assert.Equal(t, problems{
		`scope_name: metadata.yaml has "example.com/fakereceiver", the code "example.com/other"`,
	}, checkMetrics(md, []pmetric.Metrics{m}))
}
