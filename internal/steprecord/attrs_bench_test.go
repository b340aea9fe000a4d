package steprecord

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// A rank's step span as the gateway gets it from an agent (test/loadtest's
// shape: phases, loss, tokens, the collectives' summary, health) and its
// resource, read the straggler processor's way: one pass over each map.
func BenchmarkReadGatewaySpan(b *testing.B) {
	span, res := gatewaySpan()
	b.ReportAllocs()
	for b.Loop() {
		var a, r Attrs
		a.Read(span, true)
		r.Read(res, false)
		a.Inherit(&r)
		if _, err := a.Identity(); err != nil {
			b.Fatal(err)
		}
	}
}

func gatewaySpan() (span, res pcommon.Map) {
	res = pcommon.NewMap()
	_ = res.FromRaw(map[string]any{
		"service.name": "train.py", "host.name": "load-j00-n00", "training.job.id": "load-job-00", "training.attempt": 0,
		"training.rank": 13, "training.local_rank": 5, "training.world_size": 64, "gpu.uuid": "GPU-load-j00-n00-5",
	})
	span = pcommon.NewMap()
	_ = span.FromRaw(map[string]any{
		"iteration.step": 18231, "training.phase.dataload_ns": 30_000_000, "training.phase.forward_ns": 270_000_000,
		"training.phase.backward_ns": 540_000_000, "training.phase.optimizer_ns": 90_000_000, "training.loss": 2.1,
		"training.tokens": 32768, "nccl.collectives.count": 24, "nccl.collectives.total_ns": 500_000_000,
		"nccl.collectives.max_ns": 80_000_000, "gpu.health.temperature": 65.0, "gpu.health.sm_active": 0.82,
		"gpu.health.throttle_reasons": 0, "gpu.health.ecc_dbe_errors": 0, "gpu.health.ecc_sbe_errors": 0,
		"gpu.health.nvlink_crc_errors": 0, "ib.health.link_downed": 0, "ib.health.symbol_errors": 0, "gpu.health.window_s": 10,
	})
	return span, res
}
