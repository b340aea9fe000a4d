package dcgmreceiver

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// eightGPUSnapshot holds every catalogued field of 8 GPUs, as one DCGM
// collection of device and profiling fields would.
func eightGPUSnapshot(at time.Time) model.Snapshot {
	snap := model.Snapshot{Time: at}
	for i := 0; i < 8; i++ {
		s := model.GPUSample{GPU: model.GPU{
			Index: i, UUID: fmt.Sprintf("GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc4%d", i), Model: "NVIDIA H100 80GB HBM3",
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10), Device: fmt.Sprintf("nvidia%d", i), DriverVersion: "570.86.15",
		}}
		for _, f := range model.Catalogue {
			switch {
			case f.Kind == model.Label:
			case f.Kind == model.Counter || f.ID == model.FieldClocksEventReasons:
				s.Values = append(s.Values, model.Value{Field: f.ID, Int: int64(1000 + i)})
			default:
				s.Values = append(s.Values, model.Value{Field: f.ID, Float: 0.5 + float64(i), IsFloat: true})
			}
		}
		snap.GPUs = append(snap.GPUs, s)
	}
	return snap
}

func benchmarkBuild(b *testing.B, naming string) {
	start := time.Now()
	snap := eightGPUSnapshot(start)
	mb := newMetricsBuilder(naming, "xl003", "bench", pcommon.NewTimestampFromTime(start))
	owner := func(model.GPUSample) model.Owner {
		return model.Owner{PodName: "llama-70b-worker-0", Namespace: "training", Container: "pytorch"}
	}
	counts := map[string]map[int]int64{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		md := mb.build(snap, owner, counts)
		if md.ResourceMetrics().Len() != 8 {
			b.Fatal("expected 8 GPUs")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/8, "ns/GPU")
}

// One collection of 8 GPUs x every field through metric building.
func BenchmarkBuild8GPUsOTel(b *testing.B)         { benchmarkBuild(b, NamingOTel) }
func BenchmarkBuild8GPUsDCGMExporter(b *testing.B) { benchmarkBuild(b, NamingDCGMExporter) }
