package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// observeLogs maps XID records, DCGM health incidents, NCCL findings, GPU
// hangs, training errors and losses onto signals.
func (c *correlator) observeLogs(ctx context.Context, ld plog.Logs, now time.Time) {
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
				act.saw(w, now)
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
				// A DCGM health incident that appeared (not one that cleared).
				incident := event == semconv.EventGPUHealthIncident && healthIncident(a)
				if incident {
					c.observeHealthIncident(ents, w, a, base)
				}
				// A "GPU answers again" record must not match the hang rule,
				// nor a cleared health incident a rule on its event.
				if event != "" && (event != semconv.EventGPUHang || hung) && (event != semconv.EventGPUHealthIncident || incident) {
					text(semconv.AttrEventName, event)
				}
				if v, ok := a.Get(semconv.AttrTrainingError); ok && v.Type() == pcommon.ValueTypeStr {
					text(semconv.AttrTrainingError, v.Str())
				}
				if v, ok := a.Get(semconv.AttrNCCLFinding); ok && v.Type() == pcommon.ValueTypeStr {
					// A finding reports a conclusion: placed at its arrival
					// (gateway), its own time kept as the evidence's.
					s := base
					s.Signal, s.Text = semconv.AttrNCCLFinding, v.Str()
					c.placeAtArrival(&s, now)
					c.observeUnder(ents, w, s)
					c.observeFindingRanks(ctx, w.job, res.host, a, s)
				}
				if v, ok := number(a, semconv.AttrTrainingLoss); ok {
					num(semconv.AttrTrainingLoss, v)
				}
			}
		}
	}
	c.noteActivity(act)
}

// observeFindingRanks observes an NCCL finding (s, its nccl.finding
// sample) also under each rank it names (a missing_ranks finding's
// collective and ranks also under the job: observeMissingRanks) (nccl.ranks: the culprits of a
// hang, the ranks missing from a collective, the straggler, the ranks whose
// collective timed out): the finding comes from the node that read the
// dumps, with no training.rank, while the hang or timeout is the named
// ranks'. Every node that read the dumps reports the same ranks, so each
// rank gets one fault, not one per node. For a hang it also observes, under
// each culprit, the collectives it never enqueued and its Python stack,
// from the finding's evidence (nccl.evidence "rank.<r>.stuck_collective",
// "rank.<r>.python_stack"), which the nccl_hang rule quotes. At most
// maxListItemsPerSpan ranks.
//
// An agent speaks only for its own node: it read the dumps of the ranks
// that ran there (the dump directories are node-local), so a named rank is
// attributed to the reporting host. A rank known to run elsewhere (its
// step spans, or an earlier finding, named another host) is not observed:
// a pod that writes a forged dump on its node cannot implicate another
// node's rank (otelcol_faultcorrelator_finding_ranks_refused).
func (c *correlator) observeFindingRanks(ctx context.Context, job, reporter string, a pcommon.Map, s rules.Sample) {
	v, ok := a.Get(semconv.AttrNCCLRanks)
	if !ok || v.Type() != pcommon.ValueTypeSlice || job == "" {
		return
	}
	var evidence pcommon.Map
	hasEvidence, hang := false, s.Text == semconv.NCCLFindingHang
	if hang {
		if ev, ok := a.Get(semconv.AttrNCCLEvidence); ok && ev.Type() == pcommon.ValueTypeMap {
			evidence, hasEvidence = ev.Map(), true
		}
	}
	ranks := v.Slice()
	if s.Text == semconv.NCCLFindingMissingRanks {
		c.observeMissingRanks(job, reporter, a, ranks, s)
	}
	// The finding's own collective, for a culprit the evidence says nothing
	// about.
	recordCollective := ""
	if hang {
		recordCollective = findingCollective(a)
	}
	for i := 0; i < ranks.Len() && i < maxListItemsPerSpan; i++ {
		r := ranks.At(i)
		if r.Type() != pcommon.ValueTypeInt {
			continue
		}
		rank := strconv.FormatInt(r.Int(), 10)
		ent := []fault.Entity{{Kind: fault.EntityRank, Key: job + "/" + rank}}
		if !c.findingMayName(ctx, ent[0], job, reporter) {
			continue
		}
		w := where{job: job, rank: r.Int(), rankKnown: true, host: reporter}
		c.observeUnder(ent, w, s)
		if s.Text == semconv.NCCLFindingStraggler {
			// Whether the rank sends step spans (nccl_straggler opens on
			// the finding alone only for a rank that does not).
			e := s
			e.Signal, e.Text, e.Value = semconv.SignalNCCLFindingStepSpans, "", 0
			if rs, ok := c.ranks[jobRank{job, r.Int()}]; ok && rs.sendsSteps {
				e.Value = 1
			}
			c.observeUnder(ent, w, e)
		}
		collective := recordCollective
		for _, k := range [...]struct{ key, signal string }{
			{semconv.NCCLEvidenceStuckCollective, semconv.SignalNCCLHangCollective},
			{semconv.NCCLEvidencePythonStack, semconv.SignalNCCLHangStack},
		} {
			if !hasEvidence {
				break
			}
			if t, ok := evidence.Get("rank." + rank + "." + k.key); ok && t.Type() == pcommon.ValueTypeStr && t.Str() != "" {
				e := s
				e.Signal, e.Text = k.signal, t.Str()
				c.observeUnder(ent, w, e)
				if k.signal == semconv.SignalNCCLHangCollective {
					collective = ""
				}
			}
		}
		if collective != "" {
			e := s
			e.Signal, e.Text = semconv.SignalNCCLHangCollective, collective
			c.observeUnder(ent, w, e)
		}
	}
}

// observeMissingRanks observes a missing_ranks finding's collective and
// the ranks it names under the job (nccl.hang.collective, quoted by the
// job-level nccl_hang_missing_ranks rule): ranks missing from a collective
// the others entered may only have been read before they reached it (dumps
// read mid-write, or written at different moments), so the finding names
// no rank's fault; only the hang finding, whose culprits had stopped,
// does.
func (c *correlator) observeMissingRanks(job, reporter string, a pcommon.Map, ranks pcommon.Slice, s rules.Sample) {
	text := findingCollective(a)
	if text == "" {
		text = "unknown collective"
	}
	var named []string
	for i := 0; i < ranks.Len() && i < maxListItemsPerSpan; i++ {
		if r := ranks.At(i); r.Type() == pcommon.ValueTypeInt {
			named = append(named, strconv.FormatInt(r.Int(), 10))
		}
	}
	if len(named) > 0 {
		text += "; missing ranks " + strings.Join(named, ",")
	}
	e := s
	e.Signal, e.Text = semconv.SignalNCCLHangCollective, text
	c.observeUnder([]fault.Entity{{Kind: fault.EntityJob, Key: job}}, where{job: job, host: reporter}, e)
}

// findingMayName reports whether a finding from reporter may name the rank
// entity e: the rank is not known to run on another host. A finding with
// no host (not from an agent's receiver) keeps the rank's known host.
func (c *correlator) findingMayName(ctx context.Context, e fault.Entity, job, reporter string) bool {
	if reporter == "" {
		return true
	}
	known, ok := c.identity(e)
	if !ok || known.host == "" || known.host == reporter {
		return true
	}
	c.telemetry.FaultcorrelatorFindingRanksRefused.Add(ctx, 1)
	if !c.findingRefusalWarned {
		c.findingRefusalWarned = true
		c.logger.Warn("faultcorrelator: a flight-recorder finding names a rank known to run on another node; not attributed (an agent speaks only for its own node; are dump directories shared between nodes?)",
			zap.String(semconv.AttrTrainingJobID, job), zap.String("rank", e.Key), zap.String("reporter", reporter), zap.String("rank_host", known.host))
	}
	return false
}

// findingCollective renders a finding's collective from its attributes
// ("pg 0:default_pg seq 17 all_reduce"); empty when it names none.
func findingCollective(a pcommon.Map) string {
	seq, ok := a.Get(semconv.AttrNCCLCollectiveSeq)
	if !ok || seq.Type() != pcommon.ValueTypeInt {
		return ""
	}
	pg := ""
	if v, ok := a.Get(semconv.AttrNCCLPGName); ok {
		pg = v.AsString()
	}
	if v, ok := a.Get(semconv.AttrNCCLPGDesc); ok && v.AsString() != "" {
		pg += ":" + v.AsString()
	}
	text := "pg " + pg + " seq " + strconv.FormatInt(seq.Int(), 10)
	if v, ok := a.Get(semconv.AttrNCCLCollective); ok && v.AsString() != "" {
		text += " " + v.AsString()
	}
	return text
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
