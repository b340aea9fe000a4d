package steprecord

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// What the writers write, the reader reads back.
func TestWriteThenRead(t *testing.T) {
	res, span := pcommon.NewMap(), pcommon.NewMap()
	PutResource(res, Resource{Service: "train", Host: "n0", Job: "j", Attempt: 2, HasAttempt: true,
		Rank: 3, LocalRank: 3, WorldSize: 8, GPU: "GPU-3", Stage: 1, HasStage: true})
	span.PutInt("iteration.step", 7)
	PutPhase(span, "forward", 20)
	PutPhase(span, "warmup", 5)
	PutCollectives(span, Collectives{Count: 2, Total: 30, Longest: 20, LongestName: "all_reduce", Offsets: []int64{1, 2}, Anomalies: 1})
	a := Read(span, res)
	id, err := a.Identity()
	require.NoError(t, err)
	assert.Equal(t, Identity{Job: "j", Attempt: 2, Step: 7, Rank: 3}, id)
	assert.Equal(t, "1", a.Stage())
	assert.Equal(t, int64(20), a.Phase(PhaseForward))
	assert.Equal(t, int64(30), a.Int(FieldCollectivesTotalNs))
	anomalies, _ := span.Get("nccl.collectives.anomalies")
	assert.Equal(t, int64(1), anomalies.Int())
	v, _ := span.Get("training.phase.warmup_ns")
	assert.Equal(t, int64(5), v.Int())
	offsets, _ := span.Get("nccl.collectives.enqueue_offsets_ns")
	assert.Equal(t, []any{int64(1), int64(2)}, offsets.Slice().AsRaw())

	root := pcommon.NewMap()
	PutStep(root, "j", 2, 7)
	assert.Equal(t, map[string]any{"training.job.id": "j", "training.attempt": int64(2), "iteration.step": int64(7)}, root.AsRaw())
	verdict := pcommon.NewMap()
	PutIdentity(verdict, id)
	PutStage(verdict, "1")
	got := Read(verdict, pcommon.NewMap())
	gotID, err := got.Identity()
	require.NoError(t, err)
	assert.Equal(t, id, gotID)
	PutStage(verdict, "first")
	stage, _ := verdict.Get("training.pp_stage")
	assert.Equal(t, "first", stage.Str())
}

func TestNoCollectivesWritesCountAndAnomalies(t *testing.T) {
	m := pcommon.NewMap()
	PutCollectives(m, Collectives{})
	assert.Equal(t, map[string]any{"nccl.collectives.count": int64(0), "nccl.collectives.anomalies": int64(0)}, m.AsRaw())
}

func TestPutHealth(t *testing.T) {
	m := pcommon.NewMap()
	PutHealth(m, Health{})
	assert.Zero(t, m.Len(), "nothing known, nothing written")
	PutHealth(m, Health{GPU: true, SMActive: 0.5, HasSMActive: true, HasThrottle: true, Throttle: []string{"power"},
		ECCSBE: 2, XIDs: []int64{79}, IB: true, IBSymbol: 3, Window: time.Minute, Temperature: math.NaN()})
	assert.Equal(t, map[string]any{
		"gpu.health.sm_active": 0.5, "gpu.health.throttle_reasons": []any{"power"}, "gpu.health.nvlink_crc_errors": int64(0),
		"gpu.health.ecc_sbe_errors": int64(2), "gpu.health.ecc_dbe_errors": int64(0), "gpu.health.xids": []any{int64(79)},
		"ib.health.symbol_errors": int64(3), "ib.health.link_downed": int64(0), "gpu.health.window_s": 60.0,
	}, m.AsRaw())
}
