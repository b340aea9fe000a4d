package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// startupGrace: a first reading at most this long after its series started
// (the point's StartTimestamp, or that of its resource's counters: the
// agent's receiver start) is the agent's first look at the GPU. A series
// first seen later by this correlator (a gateway restart, a Kafka
// rebalance) ran while watched: its faults opened as they happened.
const startupGrace = 5 * time.Minute

// startChecks maps the signals whose first reading, when above zero, is a
// fault already present when the agent started onto the rule whose fault it
// opens (its severity, action, blast radius). The rules fire on growth or
// change, so without these the first reading is only a baseline. "" for
// gpu.xid.last: the rule an XID of the code read holds by itself. A rule
// disabled by configuration disables its check.
var startChecks = map[string]string{
	semconv.MetricGPUECCErrors + "{" + semconv.AttrGPUECCType + "=" + semconv.ECCTypeDBEVolatile + "}": "dbe_alone",
	semconv.MetricGPUXIDLast:             "",
	semconv.MetricGPURowRemapFailure:     "row_remap_failure",
	semconv.MetricGPURetiredPagesPending: "retired_pages_pending",
	semconv.MetricGPUUnresponsive:        "gpu_unresponsive",
}

// startRules resolves startChecks against the configured rules.
type startRules struct {
	bySignal map[string]rules.Rule // checks with a named rule
	xid      map[int]rules.Rule    // gpu.xid.last: by XID code
	metrics  map[string]bool       // metric names some check reads
}

func newStartRules(rs []rules.Rule) startRules {
	s := startRules{bySignal: map[string]rules.Rule{}, xid: map[int]rules.Rule{}, metrics: map[string]bool{}}
	byName := make(map[string]rules.Rule, len(rs))
	for _, r := range rs {
		if r.Disabled {
			continue
		}
		byName[r.Name] = r
	}
	s.addXIDCodes(rs)
	for sig, name := range startChecks {
		if name == "" {
			s.metrics[rules.SignalName(sig)] = true
			continue
		}
		if r, ok := byName[name]; ok {
			s.bySignal[sig] = r
			s.metrics[rules.SignalName(sig)] = true
		}
	}
	return s
}

// xidOnly returns the one condition of a GPU rule that holds on an XID
// alone ("gpu.xid in [codes]", the XID table's rules).
func xidOnly(r rules.Rule) (rules.Condition, bool) {
	conds := append(append([]rules.Condition{}, r.All...), r.Any...)
	if r.Disabled || r.Entity != fault.EntityGPU || len(conds) != 1 || conds[0].Signal != semconv.AttrGPUXID || len(conds[0].In) == 0 {
		return rules.Condition{}, false
	}
	return conds[0], true
}

// addXIDCodes indexes the XID-only rules by each code of their list; the
// first rule for a code wins, as the rules' order does for one fault.
func (s *startRules) addXIDCodes(rs []rules.Rule) {
	for _, r := range rs {
		cond, ok := xidOnly(r)
		if !ok {
			continue
		}
		for _, code := range cond.In {
			if n, ok := rules.Number(code); ok && n > 0 {
				if _, dup := s.xid[int(n)]; !dup {
					s.xid[int(n)] = r
				}
			}
		}
	}
}

// resStart finds, once per resource and only when a check needs it, the
// earliest start time of the resource's cumulative points: for the dcgm
// receiver the moment it started watching the GPU. A gauge (gpu.xid.last,
// a row-remap failure) has no start of its own.
type resStart struct {
	rm   pmetric.ResourceMetrics
	at   pcommon.Timestamp
	done bool
}

func (r *resStart) get() pcommon.Timestamp {
	if r.done {
		return r.at
	}
	r.done = true
	sms := r.rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			if m.Type() != pmetric.MetricTypeSum || m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
				continue
			}
			dps := m.Sum().DataPoints()
			for k := 0; k < dps.Len(); k++ {
				if st := dps.At(k).StartTimestamp(); st != 0 && (r.at == 0 || st < r.at) {
					r.at = st
				}
			}
		}
	}
	return r.at
}

// checkStart looks at a reading of a start-checked signal: the first
// reading of its source above zero, taken within startupGrace of the
// series' start, opens the check's fault marked present at start, with the
// series' start as its onset, so that every correlator reading the same
// series (after a restart, on another replica) computes the same fault id.
// Callers hold c.mu.
func (c *correlator) checkStart(sig, source string, v float64, at time.Time, start pcommon.Timestamp, rs *resStart, w where) {
	r, checked := c.starts.bySignal[sig]
	isXID := sig == semconv.MetricGPUXIDLast
	if !checked && !isXID {
		return
	}
	if _, seen := c.startSeen[source]; seen || len(c.startSeen) >= c.cfg.MaxEntities*4 {
		return
	}
	c.startSeen[source] = struct{}{}
	if !(v > 0) || math.IsInf(v, 0) {
		return
	}
	if isXID {
		if v != math.Trunc(v) {
			return
		}
		if r, checked = c.starts.xid[int(v)]; !checked {
			return
		}
	}
	if start == 0 {
		start = rs.get()
	}
	if start == 0 {
		return // no start to anchor a stable id to
	}
	onset := start.AsTime()
	if at.Before(onset) || at.Sub(onset) > startupGrace {
		return
	}
	var e fault.Entity
	for _, x := range w.entities() {
		if x.Kind == r.Entity {
			e = x
		}
	}
	if e.Kind == "" || len(c.startMatches) >= c.cfg.MaxOpenFaults {
		return
	}
	m := rules.Match{
		Rule: r.Name, FaultType: r.FaultType, Severity: r.Severity, Action: r.Action,
		BlastRadius: r.BlastRadius, Confidence: r.Confidence, Entity: e, Window: r.Window,
		Since: onset.UTC(), At: at,
		Evidence: []fault.Evidence{{Signal: sig, Value: v, Time: at}},
	}
	if isXID {
		m.XID = int(v)
	}
	c.startMatches = append(c.startMatches, m)
	c.remember(e, w)
	c.kept++
}
