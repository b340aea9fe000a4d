package steprecord

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

// A record as docs/training-scripts.md describes it: identity on the
// resource, the step and its measures on the span. Literal wire names:
// this is the contract's side.
func contractRecord() (span, res pcommon.Map) {
	res = pcommon.NewMap()
	_ = res.FromRaw(map[string]any{
		"service.name": "train", "training.job.id": "llama-70b", "training.attempt": 1,
		"training.rank": 5, "training.local_rank": 5, "training.world_size": 8,
		"host.name": "node-0", "gpu.uuid": "GPU-5", "training.pp_stage": 1,
	})
	span = pcommon.NewMap()
	_ = span.FromRaw(map[string]any{
		"iteration.step": 18231, "training.phase.dataload_ns": 10, "training.phase.forward_ns": 20,
		"training.phase.backward_ns": 30, "training.phase.optimizer_ns": 40, "training.loss": math.NaN(),
		"nccl.collectives.count": 4, "nccl.collectives.total_ns": 400, "nccl.collectives.max_name": "all_reduce",
	})
	return span, res
}

func TestReadContractRecord(t *testing.T) {
	span, res := contractRecord()
	a := Read(span, res)
	id, err := a.Identity()
	require.NoError(t, err)
	assert.Equal(t, Identity{Job: "llama-70b", Attempt: 1, Step: 18231, Rank: 5}, id)
	assert.Equal(t, int64(8), a.Int(FieldWorldSize))
	assert.Equal(t, int64(5), a.Int(FieldLocalRank))
	assert.Equal(t, "1", a.Stage())
	assert.Equal(t, "node-0", a.Host())
	assert.Equal(t, "GPU-5", a.GPU())
	for p, want := range [NumPhases]int64{10, 20, 30, 40} {
		assert.Equal(t, want, a.Phase(Phase(p)))
	}
	assert.Equal(t, int64(400), a.Int(FieldCollectivesTotalNs))
	assert.Zero(t, a.Int(FieldTokens), "not kept")
	assert.Zero(t, a.Wrong())
}

// What a script may send for an integer: an int or an integral double.
func TestReadIdentityAcceptsIntegralDoubles(t *testing.T) {
	span, res := contractRecord()
	res.PutDouble("training.rank", 5)
	res.PutDouble("training.attempt", 1)
	span.PutDouble("iteration.step", 18231)
	id, err := ReadIdentity(span, res)
	require.NoError(t, err)
	assert.Equal(t, Identity{Job: "llama-70b", Attempt: 1, Step: 18231, Rank: 5}, id)
}

func TestReadIdentityRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		edit         func(span, res pcommon.Map)
		field        Field
		reason       Reason
		wantInString string
	}{
		"no job":            {func(_, res pcommon.Map) { res.Remove("training.job.id") }, FieldJob, ReasonMissing, "training.job.id: missing"},
		"job an int":        {func(_, res pcommon.Map) { res.PutInt("training.job.id", 7) }, FieldJob, ReasonType, "training.job.id"},
		"empty job":         {func(_, res pcommon.Map) { res.PutStr("training.job.id", "") }, FieldJob, ReasonEmpty, "training.job.id: empty"},
		"no step":           {func(span, _ pcommon.Map) { span.Remove("iteration.step") }, FieldStep, ReasonMissing, "iteration.step"},
		"step a string":     {func(span, _ pcommon.Map) { span.PutStr("iteration.step", "18231") }, FieldStep, ReasonType, "iteration.step"},
		"step fractional":   {func(span, _ pcommon.Map) { span.PutDouble("iteration.step", 1.5) }, FieldStep, ReasonType, "iteration.step"},
		"step NaN":          {func(span, _ pcommon.Map) { span.PutDouble("iteration.step", math.NaN()) }, FieldStep, ReasonType, "iteration.step"},
		"step negative":     {func(span, _ pcommon.Map) { span.PutInt("iteration.step", -1) }, FieldStep, ReasonNegative, "iteration.step: negative"},
		"no rank":           {func(_, res pcommon.Map) { res.Remove("training.rank") }, FieldRank, ReasonMissing, "training.rank"},
		"rank a string":     {func(_, res pcommon.Map) { res.PutStr("training.rank", "5") }, FieldRank, ReasonType, "training.rank"},
		"rank negative":     {func(_, res pcommon.Map) { res.PutInt("training.rank", -1) }, FieldRank, ReasonNegative, "training.rank"},
		"attempt garbage":   {func(_, res pcommon.Map) { res.PutStr("training.attempt", "x") }, FieldAttempt, ReasonType, "training.attempt"},
		"attempt negative":  {func(_, res pcommon.Map) { res.PutInt("training.attempt", -1) }, FieldAttempt, ReasonNegative, "training.attempt"},
		"attempt 0.5":       {func(_, res pcommon.Map) { res.PutDouble("training.attempt", 0.5) }, FieldAttempt, ReasonType, "training.attempt"},
		"rank beyond 2^62":  {func(_, res pcommon.Map) { res.PutDouble("training.rank", 1<<63) }, FieldRank, ReasonType, "training.rank"},
		"rank a bool":       {func(_, res pcommon.Map) { res.PutBool("training.rank", true) }, FieldRank, ReasonType, "training.rank"},
		"span rank garbage": {func(span, res pcommon.Map) { res.Remove("training.rank"); span.PutStr("training.rank", "x") }, FieldRank, ReasonType, "training.rank"},
	} {
		t.Run(name, func(t *testing.T) {
			span, res := contractRecord()
			tc.edit(span, res)
			_, err := ReadIdentity(span, res)
			var e *Error
			require.True(t, errors.As(err, &e), "%v", err)
			assert.Equal(t, tc.field, e.Field)
			assert.Equal(t, tc.reason, e.Reason)
			assert.Contains(t, err.Error(), tc.wantInString)
		})
	}
}

func TestAbsentAttemptIsZero(t *testing.T) {
	span, res := contractRecord()
	res.Remove("training.attempt")
	id, err := ReadIdentity(span, res)
	require.NoError(t, err)
	assert.Zero(t, id.Attempt)
}

// Per attribute, the span's value when it has the contract's type, else
// the resource's; measures come from the span only.
func TestSpanOverResource(t *testing.T) {
	span, res := contractRecord()
	span.PutStr("training.job.id", "from-span")
	span.PutDouble("training.rank", 1.5) // not an integer: the resource's 5
	res.PutInt("training.phase.forward_ns", 999)
	res.PutInt("nccl.collectives.total_ns", 999)
	span.Remove("training.phase.forward_ns")
	span.Remove("nccl.collectives.total_ns")
	a := Read(span, res)
	assert.Equal(t, "from-span", a.Job())
	assert.Equal(t, int64(5), a.Int(FieldRank))
	assert.False(t, a.Has(FieldPhaseForward))
	assert.False(t, a.Has(FieldCollectivesTotalNs))
	assert.Zero(t, a.Wrong(), "a span value of the wrong type is not wrong when the resource has one")
}

// The one-pass readers on the gateway's hot path must not allocate.
func TestReadAllocatesNothing(t *testing.T) {
	span, res := contractRecord()
	res.PutStr("training.rank", "x") // the rejection path too
	allocs := testing.AllocsPerRun(100, func() {
		a := Read(span, res)
		_, _ = a.Identity()
	})
	assert.Zero(t, allocs)
}

func TestFieldOf(t *testing.T) {
	for f := FieldJob; f < numFields; f++ {
		assert.Equal(t, f, FieldOf(f.Key()), f.Key())
	}
	assert.Equal(t, FieldNone, FieldOf("service.name"))
	assert.Empty(t, FieldNone.Key())
	assert.True(t, FieldRank.OnResource())
	assert.False(t, FieldPhaseForward.OnResource())
	assert.True(t, FieldHealthECCSBE.Measured())
	assert.False(t, FieldCollectivesMaxName.Measured())
}

// A key named twice in one map is read by its first entry, the one
// pcommon.Map.Get returns (and the provenance processor judged), for
// every field Attrs keeps, through Read and through Take; a first entry
// of the wrong type is the value too.
func TestReadsAKeysFirstEntry(t *testing.T) {
	span, res := contractRecord()
	twice := func(m pcommon.Map) pcommon.Map {
		return otlpmaptest.Map(func(out pcommon.Map) {
			m.CopyTo(out)
			for k, v := range m.All() {
				if FieldOf(k) == FieldNone {
					continue
				}
				switch v.Type() {
				case pcommon.ValueTypeStr:
					out.PutStr(otlpmaptest.Repeat(k), "victim-"+v.Str())
				default:
					out.PutInt(otlpmaptest.Repeat(k), 424242)
				}
			}
		})
	}
	span2, res2 := twice(span), twice(res)
	require.Greater(t, span2.Len(), span.Len())
	got := Read(span2, res2)
	want := Read(span, res)
	assert.Equal(t, want, got, "the repeats change nothing")

	var taken Attrs
	for k, v := range span2.All() {
		taken.Take(k, v, true)
	}
	var spanOnly Attrs
	spanOnly.Read(span, true)
	assert.Equal(t, spanOnly, taken)

	wrongFirst := otlpmaptest.Map(func(m pcommon.Map) {
		m.PutStr("training.rank", "three")
		m.PutInt(otlpmaptest.Repeat("training.rank"), 3)
	})
	var a Attrs
	a.Read(wrongFirst, true)
	assert.False(t, a.Has(FieldRank))
	assert.True(t, a.Wrong().Has(FieldRank))
}
