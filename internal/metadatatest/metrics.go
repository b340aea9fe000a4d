package metadatatest // import "github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// emitted is what users see of one metric: the fields metadata.yaml
// documents.
type emitted struct {
	Description string
	Unit        string
	Kind        string // Gauge, Sum, Histogram, ...
	Monotonic   bool   // sums only
	Temporality string // sums and histograms: cumulative or delta
}

func describe(m pmetric.Metric) emitted {
	e := emitted{Description: m.Description(), Unit: m.Unit(), Kind: m.Type().String()}
	switch m.Type() {
	case pmetric.MetricTypeSum:
		e.Monotonic = m.Sum().IsMonotonic()
		e.Temporality = temporality(m.Sum().AggregationTemporality())
	case pmetric.MetricTypeHistogram:
		e.Temporality = temporality(m.Histogram().AggregationTemporality())
	case pmetric.MetricTypeExponentialHistogram:
		e.Temporality = temporality(m.ExponentialHistogram().AggregationTemporality())
	}
	return e
}

func temporality(a pmetric.AggregationTemporality) string {
	switch a {
	case pmetric.AggregationTemporalityCumulative:
		return "cumulative"
	case pmetric.AggregationTemporalityDelta:
		return "delta"
	}
	return ""
}

// compareTo records how metadata.yaml's doc of the metric at key differs
// from what the code does. What metadata.yaml leaves out (unit,
// aggregation_temporality) is not compared.
func (m metricDoc) compareTo(ps *problems, key, description string, actual emitted) {
	kind, data, err := m.kind()
	if err != nil {
		ps.addf("%s: %v", key, err)
		return
	}
	ps.compare(key, "description", description, actual.Description)
	if m.Unit != nil {
		ps.compare(key, "unit", *m.Unit, actual.Unit)
	}
	ps.compare(key, "type", kind, actual.Kind)
	if kind == "Sum" {
		ps.compare(key, "monotonic", data.Monotonic != nil && *data.Monotonic, actual.Monotonic)
	}
	if data.AggregationTemporality != "" {
		ps.compare(key, "aggregation_temporality", data.AggregationTemporality, actual.Temporality)
	}
}

// checkMetrics compares metadata.yaml's metrics with what the component
// emitted: the scope (scope_name, where metadata.yaml has one), the same
// names, and for each the same description, unit and data type. A name
// emitted two ways is a problem of its own.
func checkMetrics(md *metadata, mds []pmetric.Metrics) problems {
	var ps problems
	actual := map[string]emitted{}
	for _, batch := range mds {
		for _, rm := range batch.ResourceMetrics().All() {
			for _, sm := range rm.ScopeMetrics().All() {
				if md.ScopeName != "" {
					ps.compare("scope_name", "", md.ScopeName, sm.Scope().Name())
				}
				for _, m := range sm.Metrics().All() {
					e := describe(m)
					if prev, ok := actual[m.Name()]; ok && prev != e {
						ps.addf("metric %s is emitted two ways: %+v and %+v", m.Name(), prev, e)
						continue
					}
					actual[m.Name()] = e
				}
			}
		}
	}
	compareNames(&ps, "metrics", keys(md.Metrics), keys(actual), "emits")
	for _, name := range keys(md.Metrics) {
		if got, ok := actual[name]; ok {
			doc := md.Metrics[name]
			doc.compareTo(&ps, "metrics."+name, doc.Description, got)
		}
	}
	return ps
}

// compareNames records the names on one side only.
func compareNames(ps *problems, section string, documented, actual []string, verb string) {
	for _, n := range documented {
		if !slices.Contains(actual, n) {
			ps.addf("%s lists %s, which the component never %s", section, n, verb)
		}
	}
	for _, n := range actual {
		if !slices.Contains(documented, n) {
			ps.addf("the component %s %s, which %s does not list", verb, n, section)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
