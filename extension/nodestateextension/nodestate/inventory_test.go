package nodestate

import (
	"testing"
	"time"
)

func TestInventory(t *testing.T) {
	s, clock := newTestStore(Limits{Retention: time.Minute, MaxGPUs: 8, MaxIBPorts: 1, MaxSamplesPerSeries: 2, MaxXIDEventsPerGPU: 1})
	if s.HasGPU("GPU-a") || s.GPUCount() != 0 {
		t.Fatalf("empty store: HasGPU=%v GPUCount=%d, want false 0", s.HasGPU("GPU-a"), s.GPUCount())
	}
	clock.Set(at(0))
	s.RecordGPU("GPU-a", at(0), gpuSample(0.5, 50, 0, 0))
	clock.Set(at(30))
	s.RecordXID("GPU-b", at(30), 79) // an XID record also makes a GPU known
	s.RecordIB("mlx5_0", "1", at(30), IBSample{})
	if !s.HasGPU("GPU-a") || !s.HasGPU("GPU-b") || s.HasGPU("mlx5_0") || s.HasGPU("GPU-c") {
		t.Errorf("HasGPU a=%v b=%v mlx5_0=%v c=%v, want true true false false",
			s.HasGPU("GPU-a"), s.HasGPU("GPU-b"), s.HasGPU("mlx5_0"), s.HasGPU("GPU-c"))
	}
	if got := s.GPUCount(); got != 2 {
		t.Errorf("GPUCount = %d, want 2", got)
	}
	// GPU-a was last recorded 61 s ago: out of the inventory before any
	// write expires it.
	clock.Set(at(61))
	if s.HasGPU("GPU-a") || !s.HasGPU("GPU-b") {
		t.Errorf("after the retention: HasGPU a=%v b=%v, want false true", s.HasGPU("GPU-a"), s.HasGPU("GPU-b"))
	}
	if got := s.GPUCount(); got != 1 {
		t.Errorf("GPUCount after the retention = %d, want 1", got)
	}
}
