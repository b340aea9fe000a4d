package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// maxListItemsPerSpan bounds the items read from one list attribute of a
// span or record: XIDs, throttle reasons or the ranks a finding names.
const maxListItemsPerSpan = 16

func timeOr(ts pcommon.Timestamp, fallback time.Time) time.Time {
	if ts == 0 {
		return fallback
	}
	return ts.AsTime()
}

// placeAtArrival places s in the rule windows at now, its arrival at the
// correlator, keeping its own time (s.At) as s.DataTime, which the
// evidence keeps as its time (the arrival as observed_at). Gateway mode
// only; for readings that report a conclusion (a verdict, a finding, a
// step's signals), whose rules ask "was it said within the window", not
// for counters and gauges, whose growth must be judged over the time it
// happened: a catch-up burst at arrival would squeeze 30 minutes of
// growth into one window. The agent reads its own node live: it keeps the
// data time.
func (c *correlator) placeAtArrival(s *rules.Sample, now time.Time) {
	if c.cfg.Mode != ModeGateway || !s.DataTime.IsZero() || s.At.Equal(now) {
		return
	}
	s.DataTime, s.At = s.At, now
}

// observe records s under every entity of w and remembers what each entity
// is (host, GPU, job, rank) for the fault records. Callers hold c.mu.
func (c *correlator) observe(w where, s rules.Sample) {
	c.observeUnder(w.entities(), w, s)
}

// observeUnder is observe with w's entities computed once by the caller.
func (c *correlator) observeUnder(ents []fault.Entity, w where, s rules.Sample) {
	for _, e := range ents {
		if c.eval.ObserveSample(e, s) {
			c.remember(e, w)
			c.kept++
		}
	}
}

// observer observes the samples of one input under its entities and, when
// done, remembers each entity that kept one, once, in the order they first
// kept one: what observeUnder per sample does, with one identity update
// per entity instead of one per sample. Signals come resolved (spanSignals),
// so that no sample is looked up by name, entities by reference, so that
// each is looked up once per input (or per rank: rankState), not once per
// sample, and the evaluator is held once per batch. Callers hold c.mu.
type observer struct {
	batch rules.Batch
	refs  []rules.EntityRef
	kept  [maxEntitiesPerInput]bool
	order [maxEntitiesPerInput]int
	n     int // entities in order
}

// add observes s, whose signal is sig, under each entity.
func (o *observer) add(sig *rules.Signal, s *rules.Sample) {
	if !sig.Keeps(s) {
		return // most samples of a healthy rank: no entity keeps them
	}
	for i := range o.refs {
		if o.batch.ObserveRef(&o.refs[i], sig, s) && !o.kept[i] {
			o.kept[i] = true
			o.order[o.n] = i
			o.n++
		}
	}
}
