package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// stepSpanNumbers are the numeric attributes of a rank's train.step span
// observed as samples under their own names: the loss the script sends, the
// summary of the rank's NCCL collectives in the step and the GPU and IB
// health the agent's stepspan processor attaches from the nodestate
// extension. A fixed list bounds the work per span; samples of signals no
// rule reads are not kept.
var stepSpanNumbers = [...]string{
	semconv.AttrTrainingLoss,
	semconv.AttrCollectivesCount,
	semconv.AttrCollectivesTotalNs,
	semconv.AttrCollectivesMaxNs,
	semconv.AttrCollectivesAnomalies,
	semconv.AttrHealthSMActive,
	semconv.AttrHealthTemperature,
	semconv.AttrHealthNVLinkCRC,
	semconv.AttrHealthECCSBE,
	semconv.AttrHealthECCDBE,
	semconv.AttrHealthIBSymbol,
	semconv.AttrHealthIBLinkDowned,
}

// timedOutStatusPrefix starts the status message ncclflight gives a
// collective span the NCCL watchdog retired.
const timedOutStatusPrefix = "timed out"

// observeTraces (gateway) reads rank spans: the straggler verdict from any
// of them (train.step.verdict from the straggler processor, or an annotated
// train.step), the step's duration, loss, NCCL summary and health from
// train.step only, and the collectives the NCCL watchdog retired; and the
// job verdict of the step's root span (train.step.root). Evidence carries
// the span's ids. Every sample is placed in the rule windows at now, the
// batch's arrival, with the span's end kept as its data time
// (placeAtArrival): a verdict delayed by consumer lag or a node clock that
// is off still counts, and the lag of each verdict span is measured
// (verdict_lag.go).
func (c *correlator) observeTraces(ctx context.Context, td ptrace.Traces, now time.Time) {
	if c.cfg.Mode != ModeGateway {
		return
	}
	act := c.newActivity()
	batch := c.eval.Batch()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var res where
		res.read(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				c.observeSpan(ctx, batch, spans.At(k), res, now, act)
			}
		}
	}
	batch.Close() // noteActivity observes through the evaluator's own calls
	c.noteActivity(act)
}

func (c *correlator) observeSpan(ctx context.Context, batch rules.Batch, sp ptrace.Span, res where, now time.Time, act *activity) {
	w, isRank := rankSpanIdentity(res, sp)
	name := sp.Name()
	if !isRank {
		if name == semconv.SpanTrainStepRoot && w.job != "" {
			c.observeRootSpan(batch, sp, w.job, now)
		}
		return // only rank spans carry per-rank signals
	}
	if name == semconv.SpanTrainStepVerdict {
		c.noteVerdictLag(ctx, w.job, sp.EndTimestamp(), now)
	}
	var rs *rankState
	if w.job != "" {
		rs = c.rankStateOf(w.job, w.rank)
		if name != semconv.SpanTrainStep && (w.gpu == "" || w.host == "") {
			// A verdict span may lack the GPU its rank's step spans named.
			known, _ := c.identity(fault.Entity{Kind: fault.EntityRank, Key: rs.key})
			if w.gpu == "" {
				w.gpu = known.gpu
			}
			if w.host == "" {
				w.host = known.host
			}
		}
	}
	at := timeOr(sp.EndTimestamp(), now)
	if name != semconv.SpanTrainStepRoot && name != semconv.SpanTrainStepVerdict {
		// Sent by the rank's host, not derived by the gateway: the host
		// and the job are alive.
		act.saw(w, now)
		act.sawRank(w)
	}
	base := rules.Sample{At: at, TraceID: sp.TraceID(), SpanID: sp.SpanID()}
	c.placeAtArrival(&base, now)
	if rs != nil && name == semconv.SpanTrainStep {
		rs.sendsSteps = true
		// The rank's entities as its last step span gave them (the usual
		// case), kept in rs.
		rs.entitiesFor(w)
		c.rememberRef(rs, rs.rank) // where the rank runs, for its verdict spans
		o := observer{batch: batch, refs: rs.refs[:rs.nrefs]}
		c.observeSpanSignals(sp, name, base, &o)
		for _, i := range o.order[:o.n] {
			c.rememberRef(rs, i)
		}
		c.kept += uint64(o.n)
		return
	}
	var ents [maxEntitiesPerInput]fault.Entity
	var refs [maxEntitiesPerInput]rules.EntityRef
	var rk string
	if rs != nil {
		rk = rs.key
	}
	o := observer{batch: batch, refs: refs[:0]}
	for _, e := range w.entitiesInto(ents[:0], rk) {
		o.refs = append(o.refs, rules.EntityRef{Entity: e})
	}
	c.observeSpanSignals(sp, name, base, &o)
	for _, i := range o.order[:o.n] {
		c.remember(o.refs[i].Entity, w)
	}
	c.kept += uint64(o.n)
}

// observeSpanSignals adds the samples of a rank span to o.
func (c *correlator) observeSpanSignals(sp ptrace.Span, name string, base rules.Sample, o *observer) {
	a := sp.Attributes()
	sigs := &c.spanSignals
	if sigs.verdict.Read() {
		if v, ok := a.Get(semconv.AttrStragglerVerdict); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
			s := base
			s.Signal, s.Text = semconv.AttrStragglerVerdict, v.Str()
			s.Onset = onsetOf(a)
			o.add(&sigs.verdict, &s)
		}
	}
	switch {
	case name == semconv.SpanTrainStep:
		c.observeStepSpan(sp, o, base)
	case sp.Status().Code() == ptrace.StatusCodeError && strings.HasPrefix(sp.Status().Message(), timedOutStatusPrefix):
		if _, collective := a.Get(semconv.AttrNCCLCollective); collective {
			s := base
			s.Signal, s.Value = semconv.SignalNCCLCollectiveTimedOut, 1
			o.add(&sigs.ncclTimedOut, &s)
		}
	}
}

// spanSignals are the signals read from rank spans, resolved when the
// correlator is created: the span path neither looks them up by name nor
// reads attributes whose samples no rule would keep.
type spanSignals struct {
	verdict, jobVerdict, stepDuration, xid, throttle, ncclTimedOut rules.Signal
	numbers                                                        []namedSignal // the stepSpanNumbers some rule reads, in that order
}

type namedSignal struct {
	name string
	sig  rules.Signal
}

func newSpanSignals(ev *rules.Evaluator) spanSignals {
	s := spanSignals{
		verdict:      ev.Signal(semconv.AttrStragglerVerdict),
		jobVerdict:   ev.Signal(semconv.AttrStragglerJobVerdict),
		stepDuration: ev.Signal(semconv.MetricTrainingStepDuration),
		xid:          ev.Signal(semconv.AttrGPUXID),
		throttle:     ev.Signal(semconv.AttrHealthThrottle),
		ncclTimedOut: ev.Signal(semconv.SignalNCCLCollectiveTimedOut),
	}
	for _, name := range stepSpanNumbers {
		if sig := ev.Signal(name); sig.Read() {
			s.numbers = append(s.numbers, namedSignal{name: name, sig: sig})
		}
	}
	return s
}

// observeStepSpan reads a rank's train.step span: duration, loss, NCCL
// summary, GPU and IB health (stepSpanNumbers), and the XIDs and throttle
// reasons of its health window; only what some rule reads.
func (c *correlator) observeStepSpan(sp ptrace.Span, o *observer, base rules.Sample) {
	sigs := &c.spanSignals
	num := func(sig *rules.Signal, name string, v float64) {
		s := base
		s.Signal, s.Value = name, v
		o.add(sig, &s)
	}
	if sigs.stepDuration.Read() && sp.EndTimestamp() > sp.StartTimestamp() {
		num(&sigs.stepDuration, semconv.MetricTrainingStepDuration, sp.EndTimestamp().AsTime().Sub(sp.StartTimestamp().AsTime()).Seconds())
	}
	a := sp.Attributes()
	for i := range sigs.numbers {
		n := &sigs.numbers[i]
		if v, ok := number(a, n.name); ok {
			num(&n.sig, n.name, v)
		}
	}
	if !sigs.xid.Read() {
		// no rule reads XIDs
	} else if v, ok := a.Get(semconv.AttrHealthXIDs); ok && v.Type() == pcommon.ValueTypeSlice {
		xids := v.Slice()
		for i := 0; i < xids.Len() && i < maxListItemsPerSpan; i++ {
			if x := xids.At(i); x.Type() == pcommon.ValueTypeInt {
				num(&sigs.xid, semconv.AttrGPUXID, float64(x.Int()))
			}
		}
	}
	if !sigs.throttle.Read() {
		// no rule reads throttle reasons
	} else if v, ok := a.Get(semconv.AttrHealthThrottle); ok && v.Type() == pcommon.ValueTypeSlice {
		reasons := v.Slice()
		for i := 0; i < reasons.Len() && i < maxListItemsPerSpan; i++ {
			if r := reasons.At(i); r.Type() == pcommon.ValueTypeStr && r.Str() != "" {
				s := base
				s.Signal, s.Text = semconv.AttrHealthThrottle, r.Str()
				o.add(&sigs.throttle, &s)
			}
		}
	}
}

// observeRootSpan reads the job verdict (straggler.job_verdict, e.g.
// job.slowdown) of a step's root span, which names the job but no rank,
// under the job, placed at now (its arrival) like every span sample.
// Callers hold c.mu and batch.
func (c *correlator) observeRootSpan(batch rules.Batch, sp ptrace.Span, job string, now time.Time) {
	sig := &c.spanSignals.jobVerdict
	if !sig.Read() {
		return
	}
	v, ok := sp.Attributes().Get(semconv.AttrStragglerJobVerdict)
	if !ok || v.Type() != pcommon.ValueTypeStr || v.Str() == "" {
		return
	}
	s := rules.Sample{Signal: semconv.AttrStragglerJobVerdict, Text: v.Str(), At: timeOr(sp.EndTimestamp(), now),
		TraceID: sp.TraceID(), SpanID: sp.SpanID()}
	c.placeAtArrival(&s, now)
	ref := rules.EntityRef{Entity: fault.Entity{Kind: fault.EntityJob, Key: job}}
	if batch.ObserveRef(&ref, sig, &s) {
		c.remember(ref.Entity, where{job: job})
		c.kept++
	}
}

// onsetOf returns the onset a verdict span reports
// (straggler.onset_unix_nano: the start of its first flagged step, in the
// data's time), or zero when it reports none or nonsense (not a positive
// integer).
func onsetOf(a pcommon.Map) time.Time {
	v, ok := a.Get(semconv.AttrStragglerOnsetUnixNano)
	if !ok {
		return time.Time{}
	}
	var ns int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		ns = v.Int()
	case pcommon.ValueTypeDouble:
		if d := v.Double(); d > 0 && d < 1<<62 {
			ns = int64(d)
		}
	}
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
