package nodestate

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkGPUHealth: the traces pipeline's query for one rank's step
// against full series (600 readings of every field, one a second).
func BenchmarkGPUHealth(b *testing.B) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(1000))
	for i := range 600 {
		sample := gpuSample(0.9, 60, uint64(i/10), 0, "sw_power_cap")
		sample.XIDCounters = []XIDCounter{{Code: 119, Count: Counter{Value: 5, Start: t0, Valid: true}}}
		sample.XIDCountersComplete = true
		for g := range 8 {
			s.RecordGPU(fmt.Sprintf("GPU-%d", g), at(i), sample)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step := at(300 + i%290)
		if _, ok := s.GPUHealth(fmt.Sprintf("GPU-%d", i%8), step, step.Add(3*time.Second)); !ok {
			b.Fatal("no health")
		}
	}
}
