package ibreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// MetricConfig is one metric's setting under metrics::<name> (the contrib
// scrapers' convention). The agent has no filter processor (issue 32: OTTL
// doubled its binary); this is how a node stops sending a metric.
type MetricConfig struct {
	// Enabled: false leaves the metric out of every scrape. The node state
	// and the gateway's rules then do not see it either.
	Enabled bool `mapstructure:"enabled"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// metricNames are the names metrics:: accepts: every metric of the otel
// naming.
func metricNames() []string {
	names := make([]string, 0, numMetrics)
	for _, d := range metricDefs {
		names = append(names, d.name)
	}
	slices.Sort(names)
	return names
}

// validateMetrics checks metrics::; messages name the key.
func (cfg *Config) validateMetrics() []error {
	if len(cfg.Metrics) == 0 {
		return nil
	}
	if cfg.Naming == NamingNodeExporter {
		return []error{fmt.Errorf("metrics: applies to naming %q only; under %q the series are node_exporter's fixed set", NamingOTel, NamingNodeExporter)}
	}
	known := metricNames()
	var errs []error
	for _, name := range sortedKeys(cfg.Metrics) {
		if !slices.Contains(known, name) {
			errs = append(errs, fmt.Errorf("metrics::%s: not a metric of this receiver (one of %s)", name, strings.Join(known, ", ")))
		}
	}
	return errs
}

func sortedKeys(m map[string]MetricConfig) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// disabledMetrics are the names set enabled: false; nil when none is.
func disabledMetrics(cfg *Config) map[string]bool {
	var off map[string]bool
	for name, mc := range cfg.Metrics {
		if !mc.Enabled {
			if off == nil {
				off = map[string]bool{}
			}
			off[name] = true
		}
	}
	return off
}

// withoutDisabled wraps a scrape so that it leaves out the disabled
// metrics; with none disabled it is the scrape itself, at no cost.
func withoutDisabled(off map[string]bool, scrape func(context.Context) (pmetric.Metrics, error)) func(context.Context) (pmetric.Metrics, error) {
	if len(off) == 0 {
		return scrape
	}
	return func(ctx context.Context) (pmetric.Metrics, error) {
		md, err := scrape(ctx)
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				sms.At(j).Metrics().RemoveIf(func(m pmetric.Metric) bool { return off[m.Name()] })
			}
		}
		return md, err
	}
}
