package ibreceiver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
)

// metadata.yaml against the factory, the ocb manifests, a scrape of the
// procfs fixture (mlx4, mlx5 with every hw_counter, hfi1: every metric) and
// the telemetry builder.
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{
		Factory: NewFactory(),
		Metrics: func(t *testing.T) []pmetric.Metrics {
			cfg := createDefaultConfig().(*Config)
			cfg.SysfsRoot = filepath.Join("testdata", "procfs-sys")
			cfg.HWCounters = []string{AllHWCounters}
			s, err := newScraper(cfg, receivertest.NewNopSettings(metadata.Type))
			require.NoError(t, err)
			require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
			t.Cleanup(func() { require.NoError(t, s.shutdown(context.Background())) })
			md, err := s.scrape(context.Background())
			require.NoError(t, err)
			return []pmetric.Metrics{md}
		},
		Telemetry: func(t *testing.T, set component.TelemetrySettings) {
			tb, err := metadata.NewTelemetryBuilder(set)
			require.NoError(t, err)
			metadatatest.RecordAll(t, tb)
		},
	})
}
