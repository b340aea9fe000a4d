package dcgmreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// metadata.yaml against the factory, the ocb manifests, the metrics (naming:
// otel) of a GPU that reports every field of the catalogue, with an XID,
// and its health gauge, and the telemetry builder. The fields come in reverse catalogue order: a
// metric fed by several fields must be described the same way whichever a
// source reads first.
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{
		Factory: NewFactory(),
		Metrics: func(*testing.T) []pmetric.Metrics {
			now := time.Now()
			gpu := model.GPU{UUID: "GPU-00000000-0000-0000-0000-000000000000"}
			sample := model.GPUSample{GPU: gpu}
			for i := len(model.Catalogue) - 1; i >= 0; i-- {
				if f := model.Catalogue[i]; f.Kind != model.Label {
					sample.Values = append(sample.Values, model.Value{Field: f.ID, Int: 1})
				}
			}
			b := newMetricsBuilder(NamingOTel, "node-0", "test", pcommon.NewTimestampFromTime(now.Add(-time.Hour)))
			md := b.build(model.Snapshot{Time: now, GPUs: []model.GPUSample{sample}},
				func(model.GPUSample) model.Owner { return model.Owner{} },
				map[string]map[int]int64{gpuKey(gpu): {79: 1}})
			health := b.buildHealth(model.HealthReport{
				Time: now, GPUs: []model.GPU{gpu}, GPUSystems: []string{semconv.HealthSystemMemory},
				NVSwitches: []uint{0}, NVSwitchSystems: []string{semconv.HealthSystemNVSwitchFatal},
			}, func(model.GPU) model.Owner { return model.Owner{} })
			return []pmetric.Metrics{md, health}
		},
		Telemetry: func(t *testing.T, set component.TelemetrySettings) {
			tb, err := metadata.NewTelemetryBuilder(set)
			require.NoError(t, err)
			metadatatest.RecordAll(t, tb)
		},
	})
}
