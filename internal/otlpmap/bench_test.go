package otlpmap

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// A rank's step span as a script sends it: the resource (9 keys) and the
// span (15 keys) of test/loadtest's shape.
func stepMaps() (res, span pcommon.Map) {
	res = pcommon.NewMap()
	_ = res.FromRaw(map[string]any{
		"service.name": "train.py", "host.name": "node-a", "training.job.id": "llama-70b", "training.attempt": 0,
		"training.rank": 13, "training.local_rank": 5, "training.world_size": 64, "gpu.uuid": "GPU-a", "process.pid": 4242,
	})
	span = pcommon.NewMap()
	_ = span.FromRaw(map[string]any{
		"iteration.step": 18231, "training.phase.dataload_ns": 30_000_000, "training.phase.forward_ns": 270_000_000,
		"training.phase.backward_ns": 540_000_000, "training.phase.optimizer_ns": 90_000_000, "training.loss": 2.1,
		"training.tokens": 32768, "nccl.collectives.count": 24, "nccl.collectives.total_ns": 500_000_000,
		"nccl.collectives.max_ns": 80_000_000, "gpu.health.temperature": 65.0, "gpu.health.sm_active": 0.82,
		"gpu.health.window_s": 10, "ib.health.link_downed": 0, "ib.health.symbol_errors": 0,
	})
	return res, span
}

// The check of one step span's two maps: what every span a script sends
// costs at the agent's edge.
func BenchmarkStepSpanMaps(b *testing.B) {
	res, span := stepMaps()
	b.ReportAllocs()
	for b.Loop() {
		if !Map(res).OK() || !Map(span).OK() {
			b.Fatal("not canonical")
		}
	}
}
