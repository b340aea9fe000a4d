package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// observeLogs maps XID records, NCCL findings, GPU hangs, training errors
// and losses onto signals.
func (c *correlator) observeLogs(ld plog.Logs, now time.Time) {
	act := c.newActivity()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		var res where
		res.read(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				w := res
				a := lr.Attributes()
				w.read(a)
				at := timeOr(lr.Timestamp(), timeOr(lr.ObservedTimestamp(), now))
				act.saw(w, at)
				ents := w.entities()
				base := rules.Sample{At: at, TraceID: lr.TraceID(), SpanID: lr.SpanID()}
				num := func(sig string, v float64) {
					s := base
					s.Signal, s.Value = sig, v
					c.observeUnder(ents, w, s)
				}
				text := func(sig, v string) {
					s := base
					s.Signal, s.Text = sig, v
					c.observeUnder(ents, w, s)
				}
				if v, ok := a.Get(semconv.AttrGPUXID); ok && v.Type() == pcommon.ValueTypeInt {
					num(semconv.AttrGPUXID, float64(v.Int()))
				}
				hung := true
				if v, ok := a.Get(semconv.MetricGPUUnresponsive); ok && v.Type() == pcommon.ValueTypeBool {
					hung = v.Bool()
					num(semconv.MetricGPUUnresponsive, map[bool]float64{false: 0, true: 1}[hung])
				}
				event := lr.EventName()
				if v, ok := a.Get(semconv.AttrEventName); ok && v.Str() != "" {
					event = v.Str()
				}
				// A "GPU answers again" record must not match the hang rule.
				if event != "" && (event != semconv.EventGPUHang || hung) {
					text(semconv.AttrEventName, event)
				}
				for _, k := range []string{semconv.AttrNCCLFinding, semconv.AttrTrainingError} {
					if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
						text(k, v.Str())
					}
				}
				if v, ok := a.Get(semconv.AttrNCCLFinding); ok && v.Type() == pcommon.ValueTypeStr {
					c.observeFindingRanks(w.job, a, base, v.Str())
				}
				if v, ok := number(a, semconv.AttrTrainingLoss); ok {
					num(semconv.AttrTrainingLoss, v)
				}
			}
		}
	}
	c.noteActivity(act)
}

// observeFindingRanks observes an NCCL finding also under each rank it
// names (nccl.ranks: the ranks missing from a collective, the ranks whose
// collective timed out): the finding comes from the node that read the
// dumps, with no training.rank, while the hang or timeout is the named
// ranks'. At most maxListItemsPerSpan ranks.
func (c *correlator) observeFindingRanks(job string, a pcommon.Map, base rules.Sample, finding string) {
	v, ok := a.Get(semconv.AttrNCCLRanks)
	if !ok || v.Type() != pcommon.ValueTypeSlice || job == "" {
		return
	}
	s := base
	s.Signal, s.Text = semconv.AttrNCCLFinding, finding
	ranks := v.Slice()
	for i := 0; i < ranks.Len() && i < maxListItemsPerSpan; i++ {
		if r := ranks.At(i); r.Type() == pcommon.ValueTypeInt {
			// No host: the rank's own spans said where it runs.
			w := where{job: job, rank: r.Int(), rankKnown: true}
			c.observeUnder([]fault.Entity{{Kind: fault.EntityRank, Key: job + "/" + strconv.FormatInt(r.Int(), 10)}}, w, s)
		}
	}
}

// number returns the attribute k of a as a number (double or int).
func number(a pcommon.Map, k string) (float64, bool) {
	v, ok := a.Get(k)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double(), true
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	}
	return 0, false
}
