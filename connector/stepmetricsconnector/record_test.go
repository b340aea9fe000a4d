package stepmetricsconnector

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// read reads the one span of td and returns the record, the drop reason
// name ("" when used) and the attributes skipped.
func read(t *testing.T, td ptrace.Traces) (stepRecord, string, []skipKey) {
	t.Helper()
	rs := td.ResourceSpans().At(0)
	var skipped []skipKey
	r, reason, ok := readRecord(rs.ScopeSpans().At(0).Spans().At(0), rs.Resource().Attributes(), 65536, newPeakTable(nil),
		func(attribute, reason string) { skipped = append(skipped, skipKey{attribute, reason}) })
	if ok {
		return r, "", skipped
	}
	return r, dropReasonNames[reason], skipped
}

var h100Step = rankStep{job: "llama-70b", attempt: 1, step: 18231, rank: 5, world: 8, start: t0, dur: 2 * time.Second,
	model: "NVIDIA H100 80GB HBM3", tokens: int64(16384), dataloadNs: int64(5e8), flops: 7.9e14}

func TestReadRecord(t *testing.T) {
	r, dropped, skipped := read(t, traces(h100Step))
	require.Empty(t, dropped)
	assert.Empty(t, skipped)
	assert.Equal(t, stepRecord{
		job: "llama-70b", attempt: 1, step: 18231, rank: 5, worldSize: 8, duration: 2 * time.Second,
		hasTokens: true, tokens: 16384, hasDataloadShare: true, dataloadShare: 0.25,
		hasFlops: true, flops: 7.9e14, peak: 989.4e12,
	}, r)
}

// JSON encoders send integers as doubles; identity and numbers accept
// them when they hold integers.
func TestReadRecordDoubles(t *testing.T) {
	td := traces(h100Step)
	rs := td.ResourceSpans().At(0)
	rs.Resource().Attributes().PutDouble("training.rank", 5)
	rs.Resource().Attributes().PutDouble("training.world_size", 8)
	rs.ScopeSpans().At(0).Spans().At(0).Attributes().PutDouble("iteration.step", 18231)
	rs.ScopeSpans().At(0).Spans().At(0).Attributes().PutDouble(attrTokens, 16384.5)
	r, dropped, _ := read(t, td)
	require.Empty(t, dropped)
	assert.Equal(t, int64(5), r.rank)
	assert.Equal(t, int64(8), r.worldSize)
	assert.Equal(t, int64(18231), r.step)
	assert.Equal(t, 16384.5, r.tokens)
}

// Span attributes win over resource attributes (as in the stepspan
// processor), and a resource-only identity works.
func TestReadRecordSpanOverResource(t *testing.T) {
	td := traces(h100Step)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("training.job.id", "from-span")
	r, _, _ := read(t, td)
	assert.Equal(t, "from-span", r.job)
}

func TestReadRecordDrops(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(res, span pcommon.Map, s ptrace.Span)
		want string
	}{
		"no job":              {func(res, _ pcommon.Map, _ ptrace.Span) { res.Remove("training.job.id") }, "missing_identity"},
		"job not a string":    {func(res, _ pcommon.Map, _ ptrace.Span) { res.PutInt("training.job.id", 7) }, "missing_identity"},
		"job too long":        {func(res, _ pcommon.Map, _ ptrace.Span) { res.PutStr("training.job.id", strings.Repeat("j", 257)) }, "job_id_too_long"},
		"no step":             {func(_, span pcommon.Map, _ ptrace.Span) { span.Remove("iteration.step") }, "missing_identity"},
		"step a string":       {func(_, span pcommon.Map, _ ptrace.Span) { span.PutStr("iteration.step", "18231") }, "missing_identity"},
		"step fractional":     {func(_, span pcommon.Map, _ ptrace.Span) { span.PutDouble("iteration.step", 1.5) }, "missing_identity"},
		"step NaN":            {func(_, span pcommon.Map, _ ptrace.Span) { span.PutDouble("iteration.step", math.NaN()) }, "missing_identity"},
		"step huge double":    {func(_, span pcommon.Map, _ ptrace.Span) { span.PutDouble("iteration.step", 1e300) }, "missing_identity"},
		"step negative":       {func(_, span pcommon.Map, _ ptrace.Span) { span.PutInt("iteration.step", -1) }, "missing_identity"},
		"no rank":             {func(res, _ pcommon.Map, _ ptrace.Span) { res.Remove("training.rank") }, "missing_identity"},
		"attempt garbage":     {func(res, _ pcommon.Map, _ ptrace.Span) { res.PutStr("training.attempt", "x") }, "missing_identity"},
		"attempt negative":    {func(res, _ pcommon.Map, _ ptrace.Span) { res.PutInt("training.attempt", -1) }, "missing_identity"},
		"rank negative":       {func(res, _ pcommon.Map, _ ptrace.Span) { res.PutInt("training.rank", -1) }, "rank_out_of_range"},
		"rank over max_ranks": {func(res, _ pcommon.Map, _ ptrace.Span) { res.PutInt("training.rank", 1_000_000) }, "rank_out_of_range"},
		"rank >= world size":  {func(res, _ pcommon.Map, _ ptrace.Span) { res.PutInt("training.rank", 8) }, "rank_out_of_range"},
		"negative duration": {func(_, _ pcommon.Map, s ptrace.Span) {
			s.SetEndTimestamp(s.StartTimestamp() - 1)
		}, "invalid_duration"},
		"zero duration": {func(_, _ pcommon.Map, s ptrace.Span) { s.SetEndTimestamp(s.StartTimestamp()) }, "invalid_duration"},
		"no start time": {func(_, _ pcommon.Map, s ptrace.Span) { s.SetStartTimestamp(0) }, "invalid_duration"},
	} {
		t.Run(name, func(t *testing.T) {
			td := traces(h100Step)
			rs := td.ResourceSpans().At(0)
			span := rs.ScopeSpans().At(0).Spans().At(0)
			tc.edit(rs.Resource().Attributes(), span.Attributes(), span)
			_, dropped, _ := read(t, td)
			assert.Equal(t, tc.want, dropped)
		})
	}
}

// Unusable optional attributes are skipped (and reported) while the rest
// of the record is used.
func TestReadRecordSkips(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(res, span pcommon.Map)
		want skipKey
	}{
		"tokens a string":    {func(_, span pcommon.Map) { span.PutStr(attrTokens, "16k") }, skipKey{attrTokens, skipNotNumeric}},
		"tokens NaN":         {func(_, span pcommon.Map) { span.PutDouble(attrTokens, math.NaN()) }, skipKey{attrTokens, skipNotFinite}},
		"tokens negative":    {func(_, span pcommon.Map) { span.PutInt(attrTokens, -3) }, skipKey{attrTokens, skipNegative}},
		"flops Inf":          {func(_, span pcommon.Map) { span.PutDouble(attrFlops, math.Inf(1)) }, skipKey{attrFlops, skipNotFinite}},
		"flops a map":        {func(_, span pcommon.Map) { span.PutEmptyMap(attrFlops) }, skipKey{attrFlops, skipNotNumeric}},
		"dataload > step":    {func(_, span pcommon.Map) { span.PutInt(attrDataloadNs, int64(3*time.Second)) }, skipKey{attrDataloadNs, skipOutOfRange}},
		"dataload bytes":     {func(_, span pcommon.Map) { span.PutEmptyBytes(attrDataloadNs) }, skipKey{attrDataloadNs, skipNotNumeric}},
		"world size string":  {func(res, _ pcommon.Map) { res.PutStr("training.world_size", "8") }, skipKey{"training.world_size", skipNotNumeric}},
		"world size zero":    {func(res, _ pcommon.Map) { res.PutInt("training.world_size", 0) }, skipKey{"training.world_size", skipOutOfRange}},
		"world size huge":    {func(res, _ pcommon.Map) { res.PutInt("training.world_size", 1<<40) }, skipKey{"training.world_size", skipOutOfRange}},
		"no gpu.model":       {func(res, _ pcommon.Map) { res.Remove("gpu.model") }, skipKey{"gpu.model", skipMissing}},
		"unknown gpu.model":  {func(res, _ pcommon.Map) { res.PutStr("gpu.model", "Tesla V100") }, skipKey{"gpu.model", skipUnknown}},
		"gpu.model not text": {func(res, _ pcommon.Map) { res.PutInt("gpu.model", 100) }, skipKey{"gpu.model", skipMissing}},
		"MIG slice":          {func(res, _ pcommon.Map) { res.PutStr("gpu.mig.profile", "1g.10gb") }, skipKey{"gpu.model", skipMIG}},
	} {
		t.Run(name, func(t *testing.T) {
			td := traces(h100Step)
			rs := td.ResourceSpans().At(0)
			tc.edit(rs.Resource().Attributes(), rs.ScopeSpans().At(0).Spans().At(0).Attributes())
			r, dropped, skipped := read(t, td)
			require.Empty(t, dropped, "the record is still used")
			assert.Equal(t, []skipKey{tc.want}, skipped)
			assert.Equal(t, int64(18231), r.step)
			switch tc.want.attribute {
			case attrTokens:
				assert.False(t, r.hasTokens)
			case attrDataloadNs:
				assert.False(t, r.hasDataloadShare)
			case attrFlops, "gpu.model":
				assert.False(t, r.hasFlops)
			case "training.world_size":
				assert.Zero(t, r.worldSize)
			}
		})
	}
}

// gpu.model is not looked at, nor counted, when no FLOPs are reported.
func TestNoFlopsNoModelNeeded(t *testing.T) {
	s := h100Step
	s.flops, s.model = nil, ""
	r, dropped, skipped := read(t, traces(s))
	require.Empty(t, dropped)
	assert.Empty(t, skipped)
	assert.False(t, r.hasFlops)
}
