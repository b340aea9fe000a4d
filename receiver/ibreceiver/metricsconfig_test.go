package ibreceiver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
)

func metricCounts(md pmetric.Metrics) map[string]int {
	counts := map[string]int{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				counts[ms.At(k).Name()]++
			}
		}
	}
	return counts
}

// A metric set enabled: false is in no scrape; every other metric is as it
// was, and enabled: true changes nothing.
func TestDisabledMetricIsLeftOut(t *testing.T) {
	scrapeWith := func(metrics map[string]MetricConfig) map[string]int {
		cfg := createDefaultConfig().(*Config)
		cfg.SysfsRoot = filepath.Join("testdata", "procfs-sys")
		cfg.Metrics = metrics
		require.NoError(t, cfg.Validate())
		s, err := newScraper(cfg, receivertest.NewNopSettings(metadata.Type))
		require.NoError(t, err)
		require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
		t.Cleanup(func() { require.NoError(t, s.shutdown(context.Background())) })
		md, err := withoutDisabled(disabledMetrics(cfg), s.scrape)(context.Background())
		require.NoError(t, err)
		return metricCounts(md)
	}
	all := scrapeWith(nil)
	require.Positive(t, all[semconv.MetricIBPortXmitWait], "the fixture has xmit_wait")

	off := scrapeWith(map[string]MetricConfig{semconv.MetricIBPortXmitWait: {Enabled: false}, semconv.MetricHWErrors: {Enabled: true}})
	require.Zero(t, off[semconv.MetricIBPortXmitWait])
	delete(all, semconv.MetricIBPortXmitWait)
	require.Equal(t, all, off)
}
