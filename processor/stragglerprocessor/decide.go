package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pvalue"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/stepid"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/straggler"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"
)

// decide closes a step: scores its ranks, updates the job's persistence and
// queues the step's root span with a verdict span for every rank that has a
// verdict.
func (p *stragglerProcessor) decide(st *openStep, eff *effects) {
	js := st.job
	st.done = true
	delete(js.open, st.step)
	p.live--
	p.held -= cap(st.records)
	js.lastRanks = len(st.records)
	js.markDecided(st.step)
	eff.decided++

	samples := p.samples[:0]
	for i := range st.records {
		r := &st.records[i]
		samples = append(samples, straggler.RankSample{Rank: int(r.rank), Group: r.group, Compute: r.compute, CollectiveWait: r.wait})
	}
	d := straggler.DecideStep(samples, p.detect)
	clear(samples) // the scratch outlives the step; its strings need not
	p.samples = samples[:0]
	for _, tr := range js.persistence.Observe(st.step, d) {
		p.logTransition(js.key, tr)
	}

	var stepDuration time.Duration
	if st.end > st.start {
		stepDuration = time.Duration(min(uint64(st.end-st.start), math.MaxInt64))
	}
	key := js.key
	ids := stepIDs{trace: stepid.TraceID(key.job, key.attempt, st.step), root: stepid.RootSpanID(key.job, key.attempt, st.step)}
	td := ptrace.NewTraces()
	p.appendRoot(td, st, ids, d.Summary, len(d.Flags), js.observeDuration(stepDuration, p.cfg.SlowStepFactor))

	open := js.persistence.Open() // sorted by rank
	flags := d.Flags              // in sample order, one per flagged rank
	for i := range st.records {
		res := &d.Ranks[i]
		var flag *straggler.Flag
		verdict := ""
		if res.Flagged && len(flags) > 0 {
			flag, flags = &flags[0], flags[1:]
			verdict = verdictFlagged
		}
		if j, ok := slices.BinarySearchFunc(open, res.Rank, func(v straggler.Verdict, rank int) int { return cmp.Compare(v.Rank, rank) }); ok {
			verdict = "straggler." + open[j].Kind.String()
		}
		if verdict != "" {
			appendVerdict(td, st, ids, &st.records[i], res.Score, verdict, flag)
		}
	}
	st.records, st.seen = nil, rankSet{}
	eff.out = append(eff.out, td)
}

// stepIDs are the contract's ids of a step (internal/stepid).
type stepIDs struct {
	trace pcommon.TraceID
	root  pcommon.SpanID
}

// verdictIDMask turns the contract's id of a rank's step span into the id
// of its verdict span: XOR with a non-zero mask (the bytes of "verdict!"),
// so the two always differ.
const verdictIDMask = 0x7665726469637421

// verdictSpanID is stepid.RankSpanID XOR verdictIDMask. Should that equal
// the rank span's actual id (a script that chose its own ids, by a 2^-64
// chance) or be all zero (invalid), one bit more is flipped.
func verdictSpanID(key jobKey, step, rank int64, rankSpanID pcommon.SpanID) pcommon.SpanID {
	id := stepid.RankSpanID(key.job, key.attempt, step, rank)
	binary.BigEndian.PutUint64(id[:], binary.BigEndian.Uint64(id[:])^verdictIDMask)
	if id == rankSpanID || id.IsEmpty() {
		id[7] ^= 1
	}
	return id
}

// appendVerdict writes one rank's verdict span: a child of the step's root,
// over the rank span's time, linked to the rank span.
func appendVerdict(td ptrace.Traces, st *openStep, ids stepIDs, r *rankRecord, score float64, verdict string, flag *straggler.Flag) {
	key := st.job.key
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.PutStr(semconv.AttrTrainingJobID, key.job)
	res.PutStr(attrServiceName, gatewayService)
	if r.host != "" {
		res.PutStr(semconv.AttrHostName, r.host)
	}
	if r.gpu != "" {
		res.PutStr(semconv.AttrGPUUUID, r.gpu)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	span := ss.Spans().AppendEmpty()
	span.SetName(verdictSpanName)
	span.SetKind(ptrace.SpanKindInternal)
	span.SetTraceID(ids.trace)
	span.SetParentSpanID(ids.root)
	span.SetSpanID(verdictSpanID(key, st.step, r.rank, r.spanID))
	span.SetStartTimestamp(r.start)
	span.SetEndTimestamp(r.end)
	a := span.Attributes()
	a.EnsureCapacity(11)
	a.PutStr(semconv.AttrTrainingJobID, key.job)
	a.PutInt(attrAttempt, key.attempt)
	a.PutInt(semconv.AttrIterationStep, st.step)
	a.PutInt(semconv.AttrTrainingRank, r.rank)
	if r.group != "" {
		// as the script sent it when it is a number (the usual case)
		if stage, err := strconv.ParseInt(r.group, 10, 64); err == nil {
			a.PutInt(attrPPStage, stage)
		} else {
			a.PutStr(attrPPStage, r.group)
		}
	}
	if r.host != "" {
		a.PutStr(semconv.AttrHostName, r.host)
	}
	if r.gpu != "" {
		a.PutStr(semconv.AttrGPUUUID, r.gpu)
	}
	a.PutDouble(attrScore, score)
	a.PutStr(attrVerdict, verdict)
	if flag != nil {
		a.PutDouble(attrComputeRatio, flag.ComputeRatio)
		a.PutDouble(attrWaitRatio, flag.WaitRatio)
	}
	if !r.spanID.IsEmpty() {
		link := span.Links().AppendEmpty()
		link.SetTraceID(ids.trace)
		link.SetSpanID(r.spanID)
	}
}

// appendRoot writes the step's root span: the contract's ids, spanning every
// reported rank, with the step's statistics.
func (p *stragglerProcessor) appendRoot(td ptrace.Traces, st *openStep, ids stepIDs, sum straggler.StepSummary, flagged int, slow bool) {
	key := st.job.key
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrTrainingJobID, key.job)
	rs.Resource().Attributes().PutStr(attrServiceName, gatewayService)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	root := ss.Spans().AppendEmpty()
	root.SetName(rootSpanName)
	root.SetKind(ptrace.SpanKindInternal)
	root.SetTraceID(ids.trace)
	root.SetSpanID(ids.root)
	root.SetStartTimestamp(st.start)
	root.SetEndTimestamp(st.end)
	a := root.Attributes()
	a.PutStr(semconv.AttrTrainingJobID, key.job)
	a.PutInt(attrAttempt, key.attempt)
	a.PutInt(semconv.AttrIterationStep, st.step)
	a.PutInt(semconv.AttrTrainingWorldSize, st.worldSize)
	a.PutInt(attrRanksReported, int64(sum.RanksReported))
	a.PutInt(attrStepMean, int64(sum.Mean))
	a.PutInt(attrStepMedian, int64(sum.Median))
	a.PutInt(attrStepP99, int64(sum.P99))
	a.PutInt(attrStepMax, int64(sum.Max))
	a.PutInt(attrSlowestRank, int64(sum.SlowestRank))
	a.PutInt(attrFlaggedRanks, int64(flagged))
	a.PutBool(attrStepSlow, slow)
}

func (p *stragglerProcessor) logTransition(key jobKey, tr straggler.Transition) {
	v := tr.Verdict
	p.logger.Info("stragglerprocessor: straggler verdict "+tr.State.String(),
		zap.String("training.job.id", key.job), zap.Int64("training.attempt", key.attempt),
		zap.Int("training.rank", v.Rank), zap.String("group", v.Group),
		zap.String("kind", "straggler."+v.Kind.String()),
		zap.Int64("onset_step", v.OnsetStep), zap.Int64("last_flagged_step", v.LastFlaggedStep),
		zap.Int("flagged_steps", v.FlaggedSteps), zap.Float64("peak_ratio", v.PeakRatio),
		zap.Float64("compute_ratio", v.Evidence.ComputeRatio), zap.Float64("wait_ratio", v.Evidence.WaitRatio))
}

// isDecided reports whether a span of this step is late: the step was
// decided recently, or is older than every step the job still remembers.
func (js *jobState) isDecided(step int64) bool {
	if _, ok := js.decided[step]; ok {
		return true
	}
	return len(js.decidedOrder) == cap(js.decidedOrder) && step < js.decidedFloor
}

// markDecided remembers a decided step, forgetting the oldest beyond the
// ring's capacity.
func (js *jobState) markDecided(step int64) {
	js.decided[step] = struct{}{}
	if len(js.decidedOrder) < cap(js.decidedOrder) {
		js.decidedOrder = append(js.decidedOrder, step)
		if len(js.decidedOrder) == cap(js.decidedOrder) {
			js.decidedFloor = slices.Min(js.decidedOrder)
		}
		return
	}
	delete(js.decided, js.decidedOrder[js.decidedNext])
	js.decidedOrder[js.decidedNext] = step
	js.decidedNext = (js.decidedNext + 1) % len(js.decidedOrder)
	js.decidedFloor = slices.Min(js.decidedOrder)
}

// observeDuration reports whether d is more than factor times the mean of
// the job's recent step durations (it needs minSlowHistory of them), then
// adds d to the window.
func (js *jobState) observeDuration(d time.Duration, factor float64) bool {
	d = max(d, 0)
	n := len(js.durations)
	slow := n >= min(minSlowHistory, cap(js.durations)) && n > 0 && float64(d) > factor*js.durationSum/float64(n)
	if n < cap(js.durations) {
		js.durations = append(js.durations, d)
	} else {
		js.durationSum -= float64(js.durations[js.durationNext])
		js.durations[js.durationNext] = d
		js.durationNext = (js.durationNext + 1) % n
	}
	js.durationSum += float64(d)
	return slow
}

// signal returns the rank's own compute time and its time in collectives.
// Compute is the sum of the phase durations when the span has any, else the
// step's duration less the time in collectives, else the step's duration
// (which in synchronous training finds nothing, but is all there is).
func (a *stepAttrs) signal(span ptrace.Span) (compute, wait time.Duration) {
	wait = time.Duration(max(a.collTotal, 0))
	if a.set&anyPhase != 0 {
		return time.Duration(a.phases), wait
	}
	dur := int64(span.EndTimestamp()) - int64(span.StartTimestamp())
	if span.EndTimestamp() < span.StartTimestamp() {
		dur = 0
	}
	if a.set&hasCollTotal != 0 {
		return time.Duration(max(dur-int64(wait), 0)), wait
	}
	return time.Duration(max(dur, 0)), wait
}

func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// stepAttrs are the attributes gather reads from a rank's step span, each
// from the span or, where the span has none of the right type, from its
// resource; the phases and the time in collectives from the span only. One
// pass over each map: a lookup per attribute walked a rank span's twenty-odd
// attributes a dozen times.
type stepAttrs struct {
	job, host, gpu, group          string
	step, rank, attempt, worldSize int64
	phases, collTotal              int64
	set                            fieldSet
	// verdictOrScore: the span carries straggler.score or straggler.verdict,
	// which only this processor's decision may set.
	verdictOrScore bool
}

// fieldSet says which fields of a stepAttrs were found.
type fieldSet uint16

const (
	hasJob fieldSet = 1 << iota
	hasHost
	hasGPU
	hasGroup
	hasStep
	hasRank
	hasAttempt
	hasWorldSize
	hasCollTotal
	hasForward
	hasBackward
	hasOptimizer

	anyPhase = hasForward | hasBackward | hasOptimizer
)

// read takes from m the fields not found yet: first the span's attributes
// (fromSpan), then the resource's.
func (a *stepAttrs) read(m pcommon.Map, fromSpan bool) {
	for k, v := range m.All() {
		switch k {
		case semconv.AttrTrainingJobID:
			a.str(v, hasJob, &a.job)
		case semconv.AttrHostName:
			a.str(v, hasHost, &a.host)
		case semconv.AttrGPUUUID:
			a.str(v, hasGPU, &a.gpu)
		case attrPPStage:
			if a.set&hasGroup == 0 {
				a.group, a.set = groupString(v), a.set|hasGroup
			}
		case semconv.AttrIterationStep:
			a.int(v, hasStep, &a.step)
		case semconv.AttrTrainingRank:
			a.int(v, hasRank, &a.rank)
		case attrAttempt:
			a.int(v, hasAttempt, &a.attempt)
		case semconv.AttrTrainingWorldSize:
			a.int(v, hasWorldSize, &a.worldSize)
		}
		if !fromSpan {
			continue
		}
		switch k {
		case attrPhaseForward:
			a.phase(v, hasForward)
		case attrPhaseBackward:
			a.phase(v, hasBackward)
		case attrPhaseOptimizer:
			a.phase(v, hasOptimizer)
		case attrCollTotalNs:
			a.int(v, hasCollTotal, &a.collTotal)
		case attrScore, attrVerdict:
			a.verdictOrScore = true
		}
	}
}

// inherit takes from res, its resource's, the fields a's span lacked.
func (a *stepAttrs) inherit(res *stepAttrs) {
	missing := res.set &^ a.set
	if missing == 0 {
		return
	}
	for _, f := range [...]struct {
		bit      fieldSet
		dst, src *string
	}{{hasJob, &a.job, &res.job}, {hasHost, &a.host, &res.host}, {hasGPU, &a.gpu, &res.gpu}, {hasGroup, &a.group, &res.group}} {
		if missing&f.bit != 0 {
			*f.dst = *f.src
		}
	}
	for _, f := range [...]struct {
		bit      fieldSet
		dst, src *int64
	}{{hasStep, &a.step, &res.step}, {hasRank, &a.rank, &res.rank}, {hasAttempt, &a.attempt, &res.attempt}, {hasWorldSize, &a.worldSize, &res.worldSize}} {
		if missing&f.bit != 0 {
			*f.dst = *f.src
		}
	}
	a.set |= missing
}

// removeVerdict drops the straggler score and verdict a span arrived with:
// only this processor's decision may say who straggles, and downstream
// reads a verdict from any span naming a rank.
func removeVerdict(attrs pcommon.Map) {
	attrs.Remove(attrScore)
	attrs.Remove(attrVerdict)
}

// str sets *dst to a string v unless f was found.
func (a *stepAttrs) str(v pcommon.Value, f fieldSet, dst *string) {
	if a.set&f == 0 && v.Type() == pcommon.ValueTypeStr {
		*dst, a.set = v.Str(), a.set|f
	}
}

// int sets *dst to an integer v (pvalue.Int) unless f was found.
func (a *stepAttrs) int(v pcommon.Value, f fieldSet, dst *int64) {
	if a.set&f != 0 {
		return
	}
	if n, ok := pvalue.Int(v); ok {
		*dst, a.set = n, a.set|f
	}
}

// phase adds a phase's duration (a negative one counts zero) unless found.
func (a *stepAttrs) phase(v pcommon.Value, f fieldSet) {
	if a.set&f != 0 {
		return
	}
	if n, ok := pvalue.Int(v); ok {
		a.phases, a.set = saturatingAdd(a.phases, max(n, 0)), a.set|f
	}
}

// groupString is a pipeline stage as a group name.
func groupString(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return strconv.FormatInt(v.Int(), 10)
	case pcommon.ValueTypeStr:
		return v.Str()
	}
	return v.AsString()
}
