package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// maxIncidentsPerHost bounds the incident onsets remembered per host
// (escalation).
const maxIncidentsPerHost = 64

type counterKey struct {
	entity fault.Entity
	signal string
}

type histPoint struct{ sum, count float64 }

// openFault is one fault between its open and resolved records.
type openFault struct {
	record      fault.Record
	signature   string // what the last emitted record said; a change is an update
	lastMatched time.Time
	node        string // what it counts under for the caps (capKeys)
	source      string
}

// correlator is the one state behind the three paths of a config.
type correlator struct {
	cfg    *Config
	logger *zap.Logger
	next   consumer.Logs
	meter  metric.Meter
	now    func() time.Time

	// Fixed at creation: metric names some rule reads (in any form), and
	// the rules that read node.heartbeat with agg absent (node.silent).
	metricsRead map[string]bool
	silentRules map[string]bool
	spanSignals spanSignals
	// verdictWindow is the longest window of the rules reading straggler
	// verdicts; lagWarned, per job, when a verdict later than that was
	// last logged (verdict_lag.go).
	verdictWindow time.Duration
	lagWarned     map[string]time.Time
	// findingRefusalWarned: a finding naming another node's rank was
	// logged (once; otelcol_faultcorrelator_finding_ranks_refused counts).
	findingRefusalWarned bool

	mu   sync.Mutex
	eval *rules.Evaluator
	// info is the identity of the entities seen in this generation of
	// identityGeneration, infoOld of the last one: an entity silent for two
	// generations is forgotten, so that a gateway running for months with
	// job churn keeps room for new ranks (identity).
	info        map[fault.Entity]where
	infoOld     map[fault.Entity]where
	infoRotated time.Time                      // when info was started
	counters    map[counterKey]float64         // per entity: summed growth of cumulative counters
	sources     map[string]float64             // last value of each source counter
	histograms  map[string]histPoint           // last cumulative sum and count of each histogram
	open        map[string]*openFault          // by dedup key (id type + entity); changed through track, untrack
	index       openIndex                      // open faults by node, source and severity (caps.go)
	dropped     int                            // matches refused because a cap on open faults was full
	evicted     int                            // open faults evicted for a more severe one
	refusedNow  int                            // refusals of the evaluation in progress, logged once
	hostJobs    map[string]map[string]struct{} // gateway: watched hosts and the jobs whose ranks they run
	jobSeen     map[string]time.Time           // gateway: each watched job's latest input
	incidents   map[string][]time.Time         // per host: onsets of the faults counted for escalation
	// lastRemembered, per entity kind (rememberSlot): what remember last
	// merged into info, so that a repeat skips the lookup.
	lastRemembered [6]remembered
	// infoVersion changes whenever info does (remember, rotateIdentities).
	infoVersion uint64
	// ranks holds what the span path keeps of each rank (rankState).
	// Emptied when it outgrows max_entities.
	ranks map[jobRank]*rankState
	// batchActivity is the activity of the batch being read (newActivity).
	batchActivity activity

	// Present at start (startup.go): the checks, the sources whose first
	// reading was looked at, and the matches found for the next step.
	starts       startRules
	startSeen    map[string]struct{}
	startMatches []rules.Match

	// Hand-off (handoff.go). kept counts the samples inputs kept, so that
	// an input knows whether it can have caused a record.
	kept    uint64
	state   int
	pending *round        // the evaluation the next inputs wait for
	wake    chan struct{} // asks run for an evaluation
	stopped chan struct{} // closed by Shutdown
	cancel  context.CancelFunc
	runDone chan struct{}
	// unsent holds the records of a failed hand-off, sent again first by
	// the next evaluation (bounded by max_open_faults).
	unsent []fault.Record

	telemetry    *metadata.TelemetryBuilder
	registration metric.Registration
}

func newCorrelator(cfg *Config, set connector.Settings, next consumer.Logs) (*correlator, error) {
	rs, err := cfg.loadRules()
	if err != nil {
		return nil, fmt.Errorf("faultcorrelator: creating the connector: %w", err)
	}
	c := &correlator{
		cfg:    cfg,
		logger: set.Logger,
		next:   next,
		meter:  set.TelemetrySettings.MeterProvider.Meter(metadata.ScopeName),
		now:    time.Now,
		eval: rules.NewEvaluator(rs, rules.Limits{
			MaxEntities:         cfg.MaxEntities,
			MaxSamplesPerSeries: cfg.MaxSamplesPerSeries,
		}),
		metricsRead: map[string]bool{},
		silentRules: map[string]bool{},
		info:        map[fault.Entity]where{},
		counters:    map[counterKey]float64{},
		sources:     map[string]float64{},
		histograms:  map[string]histPoint{},
		open:        map[string]*openFault{},
		hostJobs:    map[string]map[string]struct{}{},
		jobSeen:     map[string]time.Time{},
		incidents:   map[string][]time.Time{},
		ranks:       map[jobRank]*rankState{},
		lagWarned:   map[string]time.Time{},
		index:       newOpenIndex(),
		starts:      newStartRules(rs),
		startSeen:   map[string]struct{}{},
		wake:        make(chan struct{}, 1),
		stopped:     make(chan struct{}),
	}
	if c.telemetry, err = metadata.NewTelemetryBuilder(set.TelemetrySettings); err != nil {
		return nil, fmt.Errorf("faultcorrelator: creating the telemetry: %w", err)
	}
	c.spanSignals = newSpanSignals(c.eval)
	c.verdictWindow = longestVerdictWindow(rs)
	for _, sig := range c.eval.Signals() {
		name, _, _ := strings.Cut(sig, "{")
		c.metricsRead[name] = true
	}
	for _, r := range rs {
		for _, cond := range append(append([]rules.Condition{}, r.All...), r.Any...) {
			if cond.Signal == semconv.SignalNodeHeartbeat && cond.Agg == rules.AggAbsent {
				c.silentRules[r.Name] = true
			}
		}
	}
	return c, nil
}

func (c *correlator) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false} // see ConsumeTraces
}

// Start registers the faults_open gauge and evaluates the rules every
// evaluation_interval, and whenever an input asks (handoff.go), until
// Shutdown.
func (c *correlator) Start(context.Context, component.Host) error {
	gauge, err := metadata.NewFaultsOpenGauge(c.meter)
	if err != nil {
		return fmt.Errorf("faultcorrelator: creating the faults_open gauge: %w", err)
	}
	c.registration, err = c.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for k, n := range c.openCounts() {
			o.ObserveInt64(gauge, n, metric.WithAttributes(
				attribute.String(fault.AttrType, k[0]), attribute.String(fault.AttrSeverity, k[1])))
		}
		return nil
	}, gauge)
	if err != nil {
		return fmt.Errorf("faultcorrelator: registering the faults_open callback: %w", err)
	}
	c.startLoop()
	return nil
}

// Shutdown stops the evaluation loop and releases the inputs waiting for
// it, unacknowledged; open faults are not resolved (a restart does not
// mean the hardware healed).
func (c *correlator) Shutdown(context.Context) error {
	c.stopLoop()
	if c.registration != nil {
		if err := c.registration.Unregister(); err != nil {
			return fmt.Errorf("faultcorrelator: unregistering the faults_open callback: %w", err)
		}
	}
	return nil
}

// openCounts returns the open faults by (type, severity).
func (c *correlator) openCounts() map[[2]string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[[2]string]int64{}
	for _, f := range c.open {
		out[[2]string{string(f.record.Type), string(f.record.Severity)}]++
	}
	return out
}

// The consume calls only read their input (MutatesData false): in the
// gateway the same batch goes on to the backends' pipelines, and a mutating
// consumer would make the collector copy every batch for it. Forged fault.*
// attributes (only the correlator's own records may carry them) are rare;
// a batch that has some is renamed on a private copy.

func (c *correlator) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if fault.HasForgedTraces(td) {
		own := ptrace.NewTraces()
		td.CopyTo(own)
		n := fault.StripForgedTraces(own)
		c.logger.Debug("faultcorrelator: renamed forged fault attributes on spans", zap.Int("count", n))
		td = own
	}
	return c.ingest(ctx, func(now time.Time) { c.observeTraces(ctx, td, now) })
}

func (c *correlator) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if fault.HasForgedMetrics(md) {
		own := pmetric.NewMetrics()
		md.CopyTo(own)
		n := fault.StripForgedMetrics(own)
		c.logger.Debug("faultcorrelator: renamed forged fault attributes on metrics", zap.Int("count", n))
		md = own
	}
	return c.ingest(ctx, func(now time.Time) { c.observeMetrics(md, now) })
}

func (c *correlator) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if fault.HasForged(ld) {
		own := plog.NewLogs()
		ld.CopyTo(own)
		n := fault.StripForged(own)
		c.logger.Debug("faultcorrelator: renamed forged fault attributes on logs", zap.Int("count", n))
		ld = own
	}
	return c.ingest(ctx, func(now time.Time) { c.observeLogs(ctx, ld, now) })
}

// severityRank orders severities: P1 first.
func severityRank(s fault.Severity) int {
	switch s {
	case fault.SeverityP1:
		return 0
	case fault.SeverityP2:
		return 1
	case fault.SeverityP3:
		return 2
	case fault.SeverityP4:
		return 3
	}
	return -1
}

// better reports whether a should stand for its fault rather than b.
func better(a, b rules.Match) bool {
	if severityRank(a.Severity) != severityRank(b.Severity) {
		return severityRank(a.Severity) < severityRank(b.Severity)
	}
	return a.Confidence > b.Confidence
}

func idType(m rules.Match) string {
	r := fault.Record{Type: m.FaultType, XID: m.XID}
	return r.IDType()
}

// evaluate runs the rules and hands the records of faults that opened,
// changed or resolved to the next consumer, after those of a failed
// hand-off. The records of a failed hand-off are kept to be sent again:
// the correlator already counts their faults as open (or resolved), so the
// input redelivered for the error would not bring them back.
func (c *correlator) evaluate(ctx context.Context) error {
	return c.evaluateWith(ctx, true)
}

// evaluateWith is evaluate; full false evaluates only the entities that
// received samples since their last evaluation (stepChanged).
func (c *correlator) evaluateWith(ctx context.Context, full bool) error {
	var records []fault.Record
	if full {
		records = c.step(c.now())
	} else {
		records = c.stepChanged(c.now())
	}
	c.mu.Lock()
	if len(c.unsent) > 0 {
		records = append(c.unsent, records...)
		c.unsent = nil
	}
	c.mu.Unlock()
	if len(records) == 0 {
		return nil
	}
	if err := c.handOff(ctx, records); err != nil {
		c.mu.Lock()
		if over := len(records) - c.cfg.MaxOpenFaults; over > 0 {
			c.logger.Error("faultcorrelator: fault records dropped: the next consumer keeps refusing them", zap.Int("dropped", over))
			records = records[over:]
		}
		c.unsent = records
		c.mu.Unlock()
		return err
	}
	return nil
}

// handOff gives records to the next consumer as one batch, each under its
// own resource holding its fault.id: the kafka/faults exporter keys
// gpu_faults by it (partition_logs_by_resource_attributes), so a fault's
// records stay in order on one partition.
func (c *correlator) handOff(ctx context.Context, records []fault.Record) error {
	ld := plog.NewLogs()
	rls := ld.ResourceLogs()
	rls.EnsureCapacity(len(records))
	for _, r := range records {
		rl := rls.AppendEmpty()
		rl.Resource().Attributes().PutStr(fault.AttrID, r.ID)
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(semconv.ScopeFaultRecords)
		r.ToLogRecord(sl.LogRecords().AppendEmpty())
	}
	if err := c.next.ConsumeLogs(ctx, ld); err != nil {
		return fmt.Errorf("faultcorrelator: sending %d fault records: %w", len(records), err)
	}
	return nil
}

// step evaluates at now and returns the records to emit, ordered by fault
// id. Several rules finding one fault type on one entity (XID 48 and DBE
// counter growth) are one fault; the most severe, most confident match
// speaks for it.
func (c *correlator) step(now time.Time) []fault.Record {
	return c.stepWith(now, true)
}

// stepChanged is step over only the entities that received samples since
// their last evaluation: what the inputs waiting for it can have caused,
// at a cost in proportion to them. It resolves nothing and forgets
// nothing: a fault it does not see matched may still match on an entity
// it did not evaluate; the full step on the tick does those.
func (c *correlator) stepChanged(now time.Time) []fault.Record {
	return c.stepWith(now, false)
}

func (c *correlator) stepWith(now time.Time, full bool) []fault.Record {
	var matches []rules.Match
	if full {
		matches = c.eval.Evaluate(now)
	} else {
		matches = c.eval.EvaluateChanged(now)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if full {
		c.forgetJobs(now)
		c.rotateIdentities(now)
	}
	best := map[string]rules.Match{}
	for _, m := range matches {
		key := idType(m) + "\x00" + m.Entity.String()
		if _, open := c.open[key]; !open && c.silentRules[m.Rule] && !c.jobRunning(c.hostOf(m.Entity), now.Add(-m.Window)) {
			continue // a silent host whose jobs all stopped: finished, or dead as a whole
		}
		if old, ok := best[key]; !ok || better(m, old) {
			best[key] = m
		}
	}
	// Faults present at start (startup.go): their onset and mark stand for
	// the fault unless a more severe rule matched it too.
	atStart := map[string]bool{}
	for _, m := range c.startMatches {
		key := idType(m) + "\x00" + m.Entity.String()
		if _, open := c.open[key]; open {
			continue
		}
		if old, ok := best[key]; ok && severityRank(old.Severity) < severityRank(m.Severity) {
			continue
		}
		best[key] = m
		atStart[key] = true
	}
	c.startMatches = nil
	// Most severe first, so that under a full cap a fault evicts only
	// faults of earlier evaluations, never one opened by this one.
	keys := make([]string, 0, len(best))
	for key := range best {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		si, sj := severityRank(best[keys[i]].Severity), severityRank(best[keys[j]].Severity)
		if si != sj {
			return si < sj
		}
		return keys[i] < keys[j]
	})
	var out []fault.Record
	c.refusedNow = 0
	for _, key := range keys {
		m := best[key]
		f, ok := c.open[key]
		if !ok {
			// The onset a verdict reported (data time, the same on every
			// replica) when there is one, else the earliest evidence.
			first := m.Since
			if !m.Onset.IsZero() {
				first = m.Onset
			}
			r := c.record(m, first)
			r.State = fault.StateOpen
			if atStart[key] {
				r.PresentAtStart, r.Summary = true, "present at start: "+r.Summary
			}
			if !c.admit(r) {
				continue
			}
			c.track(key, &openFault{record: r, signature: signature(r), lastMatched: now})
			out = append(out, r)
			continue
		}
		f.lastMatched = now
		r := c.record(m, f.record.FirstSeen)
		r.ID = f.record.ID // the id stays with the first onset
		if f.record.PresentAtStart {
			r.PresentAtStart, r.Summary = true, "present at start: "+r.Summary
		}
		if sig := signature(r); sig != f.signature {
			r.State = fault.StateUpdate
			c.setSeverity(f, r.Severity)
			f.record, f.signature = r, sig
			out = append(out, r)
		}
	}
	if c.refusedNow > 0 {
		c.logger.Warn("faultcorrelator: a cap on open faults is full of faults at least as severe; faults not opened",
			zap.Int("refused", c.refusedNow), zap.Int("open", len(c.open)))
	}
	if full {
		out = c.resolve(out, best, now)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].State < out[j].State
	})
	c.countOpened(out, now)
	return out
}

// resolve appends the resolved records of the open faults not matched for
// resolve_after and stops tracking them. Callers hold c.mu.
func (c *correlator) resolve(out []fault.Record, best map[string]rules.Match, now time.Time) []fault.Record {
	for key, f := range c.open {
		if _, matched := best[key]; matched || now.Sub(f.lastMatched) < c.cfg.ResolveAfter {
			continue
		}
		r := f.record
		r.State = fault.StateResolved
		r.Summary = "resolved: " + r.Summary
		c.untrack(key)
		out = append(out, r)
	}
	return out
}

// hostOf returns the host of e: its key for a node, else what its inputs
// said.
func (c *correlator) hostOf(e fault.Entity) string {
	if e.Kind == fault.EntityNode {
		return e.Key
	}
	w, _ := c.identity(e)
	return w.host
}

// countOpened observes fault.opened under the node of each fault that
// opened (but an escalation itself) and starts an incident there: a fault
// whose onset lies within incident_gap of one already counted for its node
// is part of that incident. The text "<type> <fault.id>" makes a fault that
// reopens with the same id count once, and the onset as the time makes
// replicas agree on the escalation's id. Callers hold c.mu.
func (c *correlator) countOpened(records []fault.Record, now time.Time) {
	var opened []fault.Record
	for _, r := range records {
		if r.State == fault.StateOpen && r.Type != fault.TypeNodeRepeatedFaults && r.HostName != "" {
			opened = append(opened, r)
		}
	}
	// Earliest onset first: an incident is counted by its first fault.
	sort.SliceStable(opened, func(i, j int) bool { return opened[i].FirstSeen.Before(opened[j].FirstSeen) })
	keep := c.eval.ForgetAfter(fault.EntityNode)
	for _, r := range opened {
		onsets := c.incidents[r.HostName]
		if onsets == nil && len(c.incidents) >= c.cfg.MaxEntities {
			continue
		}
		kept, sameIncident := onsets[:0], false
		for _, t := range onsets {
			if now.Sub(t) > keep {
				continue // older than the escalation can look back
			}
			kept = append(kept, t)
			if d := r.FirstSeen.Sub(t); d < c.cfg.IncidentGap && d > -c.cfg.IncidentGap {
				sameIncident = true
			}
		}
		if !sameIncident {
			if len(kept) >= maxIncidentsPerHost {
				kept = kept[1:]
			}
			kept = append(kept, r.FirstSeen)
			c.observe(where{host: r.HostName}, rules.Sample{Signal: semconv.SignalFaultOpened, Value: 1, Text: r.IDType() + " " + r.ID, At: r.FirstSeen})
		}
		c.incidents[r.HostName] = kept
	}
}

// record builds the fault record of m with onset firstSeen.
func (c *correlator) record(m rules.Match, firstSeen time.Time) fault.Record {
	w, _ := c.identity(m.Entity)
	// The key names a node or a job whose identity was forgotten.
	switch {
	case m.Entity.Kind == fault.EntityNode && w.host == "":
		w.host = m.Entity.Key
	case m.Entity.Kind == fault.EntityJob && w.job == "":
		w.job = m.Entity.Key
	}
	r := fault.Record{
		Type: m.FaultType, XID: m.XID, Severity: m.Severity, Confidence: m.Confidence,
		Rule: m.Rule, Action: m.Action, BlastRadius: m.BlastRadius, Entity: m.Entity,
		HostName: w.host, GPUUUID: w.gpu, JobID: w.job, Rank: w.rank, RankKnown: w.rankKnown,
		FirstSeen: firstSeen, LastSeen: m.At, Evidence: m.Evidence,
	}
	r.ID = r.ComputeID(c.cfg.FaultIDBucket)
	r.Summary = summary(r)
	return r
}

// summary is the one human sentence of the log body.
func summary(r fault.Record) string {
	var b strings.Builder
	b.WriteString(string(r.Type))
	if r.XID != 0 {
		b.WriteString(" (XID " + strconv.Itoa(r.XID) + ")")
	}
	b.WriteString(" on " + r.Entity.String())
	if r.HostName != "" {
		b.WriteString(" (node " + r.HostName + ")")
	}
	b.WriteString(": ")
	for i, ev := range r.Evidence {
		if i > 0 {
			b.WriteString(", ")
		}
		if ev.Text != "" {
			b.WriteString(ev.Signal + "=" + ev.Text)
		} else {
			b.WriteString(ev.Signal + "=" + strconv.FormatFloat(ev.Value, 'g', 4, 64))
		}
	}
	b.WriteString(" -> " + string(r.Action))
	return b.String()
}

// signature is what makes a change material: the rule, severity,
// confidence and the evidence's signals and values (not their times, so
// that the same reading seen again is no update).
func signature(r fault.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%g", r.Rule, r.Severity, r.Confidence)
	for _, ev := range r.Evidence {
		fmt.Fprintf(&b, "|%s=%g/%s", ev.Signal, ev.Value, ev.Text)
	}
	return b.String()
}
