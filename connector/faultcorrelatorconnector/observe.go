package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Signal and attribute names the correlator reads besides metric names
// (docs/fault-record.md, "Signals the rules read").
const (
	signalHeartbeat       = "node.heartbeat"
	signalStepDuration    = "training.step.duration"
	signalFaultOpened     = "fault.opened"
	signalNCCLTimedOut    = "nccl.collective.timed_out"
	attrStragglerVerdict  = "straggler.verdict"
	attrTrainingError     = "training.error"
	attrTrainingLoss      = "training.loss"
	attrGPUUnresponsive   = "gpu.unresponsive"
	attrIBDevice          = "ib.device"
	attrIBPort            = "ib.port"
	attrHealthXIDs        = "gpu.health.xids"
	attrHealthThrottle    = "gpu.health.throttle_reasons"
	attrNCCLRanks         = "nccl.ranks" // the ranks an NCCL finding names
	timedOutStatusPrefix  = "timed out"  // ncclflight's status message of a collective the watchdog retired
	maxListItemsPerSpan   = 16           // XIDs, throttle reasons or finding ranks read from one span or record
	maxJobsPerWatchedHost = 64           // jobs remembered per watched host (node.silent)
	maxIncidentsPerHost   = 64           // incident onsets remembered per host (escalation)
)

// Span names: the rank's step (the training contract, stepspan processor)
// and the spans the gateway's straggler processor derives from a step.
const (
	spanStep        = "train.step"
	spanStepRoot    = "train.step.root"
	spanStepVerdict = "train.step.verdict"
)

// stepSpanNumbers are the numeric attributes of a rank's train.step span
// observed as samples under their own names: the loss the script sends, the
// summary of the rank's NCCL collectives in the step and the GPU and IB
// health the agent's stepspan processor attaches from the nodestate
// extension. A fixed list bounds the work per span; samples of signals no
// rule reads are not kept.
var stepSpanNumbers = [...]string{
	attrTrainingLoss,
	"nccl.collectives.count",
	"nccl.collectives.total_ns",
	"nccl.collectives.max_ns",
	"nccl.collectives.anomalies",
	"gpu.health.sm_active",
	"gpu.health.temperature",
	"gpu.health.nvlink_crc_errors",
	"gpu.health.ecc_sbe_errors",
	"gpu.health.ecc_dbe_errors",
	"ib.health.symbol_errors",
	"ib.health.link_downed",
}

// where is what one input says about the entities it belongs to.
type where struct {
	host, gpu, job, ibDevice, ibPort string
	rank                             int64
	rankKnown                        bool
}

// read fills w from attrs; later maps (a record's own attributes) override
// earlier ones (its resource's). One pass over attrs: a rank span carries
// some twenty attributes, and a lookup per field walked them six times.
func (w *where) read(attrs pcommon.Map) {
	str := func(v pcommon.Value, dst *string) {
		if s := v.AsString(); s != "" {
			*dst = s
		}
	}
	for k, v := range attrs.All() {
		switch k {
		case semconv.AttrHostName:
			str(v, &w.host)
		case semconv.AttrGPUUUID:
			str(v, &w.gpu)
		case semconv.AttrTrainingJobID:
			str(v, &w.job)
		case attrIBDevice:
			str(v, &w.ibDevice)
		case attrIBPort:
			str(v, &w.ibPort)
		case semconv.AttrTrainingRank:
			switch v.Type() {
			case pcommon.ValueTypeInt:
				w.rank, w.rankKnown = v.Int(), true
			case pcommon.ValueTypeStr:
				if n, err := strconv.ParseInt(v.Str(), 10, 64); err == nil {
					w.rank, w.rankKnown = n, true
				}
			}
		}
	}
}

// maxEntitiesPerInput bounds entities: GPU, IB port, rank, node and job.
const maxEntitiesPerInput = 5

// entities lists every entity the input belongs to, finest first: a signal
// is observed under each, so rules on any kind see it.
func (w where) entities() []fault.Entity {
	return w.entitiesInto(nil, "")
}

// rankKey is the key of the rank entity of job's rank.
func rankKey(job string, rank int64) string {
	return job + "/" + strconv.FormatInt(rank, 10)
}

type jobRank struct {
	job  string
	rank int64
}

// rankState is what the span path keeps of a rank between its spans. A
// gateway sees every rank's step span every step, and each says what the
// last one said: the rank's key, and its entities, resolved in the
// evaluator for the identity (w) its last step span gave, let the next one
// skip building the key and looking up the entities; remembered lets it
// skip remember's identity lookups. On a gateway with thousands of ranks
// those lookups are cache misses, the span path's main cost.
type rankState struct {
	key   string
	w     where // the identity refs were built for
	refs  [maxEntitiesPerInput]rules.EntityRef
	nrefs int
	rank  int // index of the rank entity in refs
	// remembered: bit i set when remember merged w into refs[i]'s identity
	// while c.info was at version infoVersion. remember is idempotent, so
	// until info changes again it would change nothing.
	remembered  uint8
	infoVersion uint64
}

// rankStateOf returns job's rank's state, created while c.ranks has room.
// Callers hold c.mu.
func (c *correlator) rankStateOf(job string, rank int64) *rankState {
	jr := jobRank{job, rank}
	if rs, ok := c.ranks[jr]; ok {
		return rs
	}
	if len(c.ranks) >= c.cfg.MaxEntities {
		clear(c.ranks)
	}
	rs := &rankState{key: rankKey(job, rank)}
	// The job string may point into a decoded batch: the key holds a copy.
	c.ranks[jobRank{strings.Clone(job), rank}] = rs
	return rs
}

// entitiesFor makes rs's entities those of w, as the rank's latest step
// span gave it, unless they already are.
func (rs *rankState) entitiesFor(w where) {
	if rs.nrefs > 0 && rs.w == w {
		return
	}
	var ents [maxEntitiesPerInput]fault.Entity
	rs.nrefs = 0
	for i, e := range w.entitiesInto(ents[:0], rs.key) {
		rs.refs[i] = rules.EntityRef{Entity: e}
		if e.Kind == fault.EntityRank {
			rs.rank = i
		}
		rs.nrefs++
	}
	rs.w, rs.remembered = w, 0
}

// rememberRef is remember(rs.refs[i].Entity, rs.w) unless it was done since
// c.info last changed.
func (c *correlator) rememberRef(rs *rankState, i int) {
	if rs.infoVersion != c.infoVersion {
		rs.remembered, rs.infoVersion = 0, c.infoVersion
	}
	if rs.remembered&(1<<i) != 0 {
		return
	}
	c.remember(rs.refs[i].Entity, rs.w)
	// Its own write changed info: what rs remembered still holds.
	rs.remembered, rs.infoVersion = rs.remembered|1<<i, c.infoVersion
}

// entitiesInto is entities appended to out, so that a caller can pass an
// array's slice and spare the allocation; rk, when not empty, is the rank
// key the caller already built.
func (w where) entitiesInto(out []fault.Entity, rk string) []fault.Entity {
	if w.gpu != "" {
		out = append(out, fault.Entity{Kind: fault.EntityGPU, Key: w.gpu})
	}
	if w.host != "" && w.ibDevice != "" && w.ibPort != "" {
		out = append(out, fault.Entity{Kind: fault.EntityIBPort, Key: w.host + "/" + w.ibDevice + "/" + w.ibPort})
	}
	if w.job != "" && w.rankKnown {
		if rk == "" {
			rk = rankKey(w.job, w.rank)
		}
		out = append(out, fault.Entity{Kind: fault.EntityRank, Key: rk})
	}
	if w.host != "" {
		out = append(out, fault.Entity{Kind: fault.EntityNode, Key: w.host})
	}
	if w.job != "" {
		out = append(out, fault.Entity{Kind: fault.EntityJob, Key: w.job})
	}
	return out
}

func timeOr(ts pcommon.Timestamp, fallback time.Time) time.Time {
	if ts == 0 {
		return fallback
	}
	return ts.AsTime()
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

// remembered is the identity remember was last given for an entity of one
// kind (after the coarse kinds' fields are cleared): the same again, as
// from the spans of one host or one job in a row, changes nothing.
type remembered struct {
	entity fault.Entity
	w      where
	ok     bool
}

// rememberSlot returns the slot of c.lastRemembered for kind k.
func rememberSlot(k fault.EntityKind) int {
	switch k {
	case fault.EntityGPU:
		return 0
	case fault.EntityNode:
		return 1
	case fault.EntityIBPort:
		return 2
	case fault.EntityRank:
		return 3
	case fault.EntityJob:
		return 4
	}
	return 5 // any other kind
}

// remember keeps the identity of e; bounded like the evaluator's entities.
func (c *correlator) remember(e fault.Entity, w where) {
	// Coarse entities (node, job) must not carry one GPU's or rank's
	// identity (nor a rank number, which says nothing without rankKnown).
	switch e.Kind {
	case fault.EntityNode, fault.EntityIBPort:
		w.gpu, w.job, w.rank, w.rankKnown = "", "", 0, false
	case fault.EntityJob:
		w.gpu, w.host, w.rank, w.rankKnown = "", "", 0, false
	}
	last := &c.lastRemembered[rememberSlot(e.Kind)]
	if last.ok && last.entity == e && last.w == w {
		return // merging the same identity again keeps what c.info holds
	}
	old, known := c.identity(e)
	if !known && len(c.info) >= c.cfg.MaxEntities {
		return
	}
	*last = remembered{entity: e, w: w, ok: true}
	if w.host == "" {
		w.host = old.host
	}
	if w.gpu == "" {
		w.gpu = old.gpu // a rank's verdict span may not name the GPU its step spans did
	}
	if e.Kind == fault.EntityGPU && w.job == "" && !w.rankKnown {
		// A GPU's metrics name no job: its record keeps the job and rank
		// that the latest span of the GPU named, rather than losing them
		// to every scrape in between.
		w.job, w.rank, w.rankKnown = old.job, old.rank, old.rankKnown
	}
	if known && old == w {
		return // the usual case: a rank's every span says the same
	}
	c.info[e] = w
	c.infoVersion++
}

// identityGeneration is how long an identity is kept after the entity was
// last remembered: one to two generations, at least the evaluator's default
// forget_after (rules.Limits), for which it keeps the entity's samples.
const identityGeneration = time.Hour

// identity returns what e was last remembered as, moving it into the
// current generation. Callers hold c.mu.
func (c *correlator) identity(e fault.Entity) (where, bool) {
	if w, ok := c.info[e]; ok {
		return w, true
	}
	w, ok := c.infoOld[e]
	if ok {
		delete(c.infoOld, e)
		c.info[e] = w
	}
	return w, ok
}

// rotateIdentities starts a new generation once the current one is
// identityGeneration old, dropping the identities not remembered since the
// last rotation. Callers hold c.mu.
func (c *correlator) rotateIdentities(now time.Time) {
	if c.infoRotated.IsZero() {
		c.infoRotated = now
	}
	if now.Sub(c.infoRotated) < identityGeneration {
		return
	}
	c.infoOld, c.info = c.info, make(map[fault.Entity]where, len(c.info))
	c.infoRotated = now
	c.infoVersion++ // what rankState remembered must move to the new generation
	// A repeat of the last identity skips remember's lookup, which is what
	// moves an entity into the new generation.
	c.lastRemembered = [len(c.lastRemembered)]remembered{}
}

// activity is what one batch says about who is alive (gateway mode, for
// node.silent): the latest time each host and each job sent anything, and
// which hosts run ranks of which job. A nil activity (agent mode) notes
// nothing.
type activity struct {
	hosts map[string]time.Time
	jobs  map[string]time.Time
	ranks map[hostJob]struct{}
	// The last host, job and rank host noted, with the host's and job's
	// times: consecutive spans mostly share them, and these spare the
	// map updates.
	lastHost, lastJob     string
	lastHostAt, lastJobAt time.Time
	lastRank              hostJob
}

type hostJob struct{ host, job string }

// newActivity returns the activity of one batch, nil in agent mode. It is
// c.batchActivity emptied: a gateway's batches are often one Kafka message
// of a few spans, and three new maps for each was most of what the span
// path allocated. Callers hold c.mu until they noted it.
func (c *correlator) newActivity() *activity {
	if c.cfg.Mode != ModeGateway {
		return nil
	}
	a := &c.batchActivity
	if a.hosts == nil {
		*a = activity{hosts: map[string]time.Time{}, jobs: map[string]time.Time{}, ranks: map[hostJob]struct{}{}}
		return a
	}
	clear(a.hosts)
	clear(a.jobs)
	clear(a.ranks)
	*a = activity{hosts: a.hosts, jobs: a.jobs, ranks: a.ranks}
	return a
}

// saw notes an input about w at time at: its host and its job are alive.
func (a *activity) saw(w where, at time.Time) {
	if a == nil {
		return
	}
	if w.host != "" && (w.host != a.lastHost || at.After(a.lastHostAt)) {
		if at.After(a.hosts[w.host]) {
			a.hosts[w.host] = at
		}
		a.lastHost, a.lastHostAt = w.host, a.hosts[w.host]
	}
	if w.job != "" && (w.job != a.lastJob || at.After(a.lastJobAt)) {
		if at.After(a.jobs[w.job]) {
			a.jobs[w.job] = at
		}
		a.lastJob, a.lastJobAt = w.job, a.jobs[w.job]
	}
}

// sawRank notes a rank span: its host runs ranks of its job.
func (a *activity) sawRank(w where) {
	if a != nil && w.host != "" && w.job != "" && w.rankKnown {
		if hj := (hostJob{w.host, w.job}); hj != a.lastRank {
			a.ranks[hj] = struct{}{}
			a.lastRank = hj
		}
	}
}

// noteActivity applies a batch's activity. A host is watched from its
// first rank span on: node.heartbeat is observed for watched hosts only, so
// a node that never ran a rank never goes "silent". Whether the host's
// jobs are still running is checked when node_silent matches
// (jobRunning). Callers hold c.mu.
func (c *correlator) noteActivity(a *activity) {
	if a == nil {
		return
	}
	for hj := range a.ranks {
		jobs := c.hostJobs[hj.host]
		if jobs == nil {
			if len(c.hostJobs) >= c.cfg.MaxEntities {
				continue
			}
			jobs = map[string]struct{}{}
			c.hostJobs[hj.host] = jobs
		}
		if _, known := jobs[hj.job]; !known && len(jobs) >= maxJobsPerWatchedHost {
			continue
		}
		if _, known := c.jobSeen[hj.job]; !known {
			if len(c.jobSeen) >= c.cfg.MaxEntities {
				continue
			}
			c.jobSeen[hj.job] = time.Time{}
		}
		jobs[hj.job] = struct{}{}
	}
	for job, at := range a.jobs {
		if last, known := c.jobSeen[job]; known && at.After(last) {
			c.jobSeen[job] = at
		}
	}
	for host, at := range a.hosts {
		if _, watched := c.hostJobs[host]; watched {
			c.observe(where{host: host}, rules.Sample{Signal: signalHeartbeat, Value: 1, At: at})
		}
	}
}

// jobRunning reports whether a job with ranks on host sent anything at or
// after since. Callers hold c.mu.
func (c *correlator) jobRunning(host string, since time.Time) bool {
	for job := range c.hostJobs[host] {
		if !c.jobSeen[job].Before(since) {
			return true
		}
	}
	return false
}

// forgetJobs drops jobs that sent nothing for as long as the evaluator
// remembers a node, and stops watching hosts left without a job. Callers
// hold c.mu.
func (c *correlator) forgetJobs(now time.Time) {
	cutoff := now.Add(-c.eval.ForgetAfter(fault.EntityNode))
	dropped := false
	for job, last := range c.jobSeen {
		if last.Before(cutoff) {
			delete(c.jobSeen, job)
			dropped = true
		}
	}
	if !dropped {
		return
	}
	for host, jobs := range c.hostJobs {
		for job := range jobs {
			if _, known := c.jobSeen[job]; !known {
				delete(jobs, job)
			}
		}
		if len(jobs) == 0 {
			delete(c.hostJobs, host)
		}
	}
}

// observeMetrics maps data points onto signals: "name" and "name{k=v}" for
// each point attribute. Cumulative sums are turned into one counter per
// entity (the sum of every source's growth), so that a node's series does
// not interleave its eight GPUs' counters; a histogram contributes its mean
// over the interval.
func (c *correlator) observeMetrics(md pmetric.Metrics, now time.Time) {
	act := c.newActivity()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		var res where
		res.read(rm.Resource().Attributes())
		resKey := mapKey(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					c.numberPoints(m.Name(), m.Gauge().DataPoints(), res, resKey, false, now, act)
				case pmetric.MetricTypeSum:
					cumulative := m.Sum().IsMonotonic() && m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityCumulative
					c.numberPoints(m.Name(), m.Sum().DataPoints(), res, resKey, cumulative, now, act)
				case pmetric.MetricTypeHistogram:
					c.histogramPoints(m.Name(), m.Histogram(), res, resKey, now, act)
				}
			}
		}
	}
	c.noteActivity(act)
}

func (c *correlator) numberPoints(name string, dps pmetric.NumberDataPointSlice, res where, resKey string, cumulative bool, now time.Time, act *activity) {
	read := c.metricsRead[name]
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		w := res
		w.read(dp.Attributes())
		at := timeOr(dp.Timestamp(), now)
		act.saw(w, at)
		if !read {
			continue // no rule reads this metric in any form
		}
		v := dp.DoubleValue()
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			v = float64(dp.IntValue())
		}
		ents := w.entities()
		for _, sig := range signalNames(name, dp.Attributes()) {
			if !cumulative {
				c.observeUnder(ents, w, rules.Sample{Signal: sig, Value: v, At: at})
				continue
			}
			growth := c.counterGrowth(resKey+"\x00"+sig+"\x00"+mapKey(dp.Attributes()), v)
			for _, e := range ents {
				total := c.counters[counterKey{e, sig}] + growth
				if c.eval.ObserveSample(e, rules.Sample{Signal: sig, Value: total, At: at}) {
					c.counters[counterKey{e, sig}] = total
					c.remember(e, w)
				}
			}
		}
	}
}

// counterGrowth returns how much one source counter grew since its last
// point (0 the first time; a drop is a reset, counted from zero).
func (c *correlator) counterGrowth(source string, v float64) float64 {
	prev, seen := c.sources[source]
	if !seen && len(c.sources) >= c.cfg.MaxEntities*4 {
		return 0 // bounded: an unknown source beyond the limit adds nothing
	}
	c.sources[source] = v
	switch {
	case !seen:
		return 0
	case v < prev:
		return v
	default:
		return v - prev
	}
}

func (c *correlator) histogramPoints(name string, h pmetric.Histogram, res where, resKey string, now time.Time, act *activity) {
	read := c.metricsRead[name]
	dps := h.DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		w := res
		w.read(dp.Attributes())
		at := timeOr(dp.Timestamp(), now)
		act.saw(w, at)
		if !read {
			continue
		}
		sum, count := dp.Sum(), float64(dp.Count())
		if h.AggregationTemporality() == pmetric.AggregationTemporalityCumulative {
			key := resKey + "\x00" + name + "\x00" + mapKey(dp.Attributes())
			prev, seen := c.histograms[key]
			if seen || len(c.histograms) < c.cfg.MaxEntities*4 {
				c.histograms[key] = histPoint{sum: sum, count: count}
			}
			if seen && count >= prev.count {
				sum, count = sum-prev.sum, count-prev.count
			}
		}
		if count <= 0 {
			continue
		}
		ents := w.entities()
		for _, sig := range signalNames(name, dp.Attributes()) {
			c.observeUnder(ents, w, rules.Sample{Signal: sig, Value: sum / count, At: at})
		}
	}
}

// signalNames returns name and name{k=v} for each attribute.
func signalNames(name string, attrs pcommon.Map) []string {
	out := []string{name}
	attrs.Range(func(k string, v pcommon.Value) bool {
		out = append(out, name+"{"+k+"="+v.AsString()+"}")
		return true
	})
	return out
}

// mapKey is a stable text form of attrs, to tell sources apart.
func mapKey(attrs pcommon.Map) string {
	parts := make([]string, 0, attrs.Len())
	attrs.Range(func(k string, v pcommon.Value) bool {
		parts = append(parts, k+"="+v.AsString())
		return true
	})
	sort.Strings(parts)
	return strings.Join(parts, "\x01")
}

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
				if v, ok := a.Get(attrGPUUnresponsive); ok && v.Type() == pcommon.ValueTypeBool {
					hung = v.Bool()
					num(attrGPUUnresponsive, map[bool]float64{false: 0, true: 1}[hung])
				}
				event := lr.EventName()
				if v, ok := a.Get(semconv.AttrEventName); ok && v.Str() != "" {
					event = v.Str()
				}
				// A "GPU answers again" record must not match the hang rule.
				if event != "" && (event != semconv.EventGPUHang || hung) {
					text(semconv.AttrEventName, event)
				}
				for _, k := range []string{semconv.AttrNCCLFinding, attrTrainingError} {
					if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
						text(k, v.Str())
					}
				}
				if v, ok := a.Get(semconv.AttrNCCLFinding); ok && v.Type() == pcommon.ValueTypeStr {
					c.observeFindingRanks(w.job, a, base, v.Str())
				}
				if v, ok := number(a, attrTrainingLoss); ok {
					num(attrTrainingLoss, v)
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
	v, ok := a.Get(attrNCCLRanks)
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

// observeTraces (gateway) reads rank spans: the straggler verdict from any
// of them (train.step.verdict from the straggler processor, or an annotated
// train.step), the step's duration, loss, NCCL summary and health from
// train.step only, and the collectives the NCCL watchdog retired. Evidence
// carries the span's ids.
func (c *correlator) observeTraces(td ptrace.Traces, now time.Time) {
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
				c.observeSpan(batch, spans.At(k), res, now, act)
			}
		}
	}
	batch.Close() // noteActivity observes through the evaluator's own calls
	c.noteActivity(act)
}

func (c *correlator) observeSpan(batch rules.Batch, sp ptrace.Span, res where, now time.Time, act *activity) {
	w := res
	w.read(sp.Attributes())
	if !w.rankKnown {
		return // only rank spans carry per-rank signals
	}
	name := sp.Name()
	var rs *rankState
	if w.job != "" {
		rs = c.rankStateOf(w.job, w.rank)
		if name != spanStep && (w.gpu == "" || w.host == "") {
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
	if name != spanStepRoot && name != spanStepVerdict {
		// Sent by the rank's host, not derived by the gateway: the host
		// and the job are alive.
		act.saw(w, at)
		act.sawRank(w)
	}
	base := rules.Sample{At: at, TraceID: sp.TraceID(), SpanID: sp.SpanID()}
	if rs != nil && name == spanStep {
		// The rank's entities as its last step span gave them (the usual
		// case), kept in rs.
		rs.entitiesFor(w)
		c.rememberRef(rs, rs.rank) // where the rank runs, for its verdict spans
		o := observer{batch: batch, refs: rs.refs[:rs.nrefs]}
		c.observeSpanSignals(sp, name, base, &o)
		for _, i := range o.order[:o.n] {
			c.rememberRef(rs, i)
		}
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
}

// observeSpanSignals adds the samples of a rank span to o.
func (c *correlator) observeSpanSignals(sp ptrace.Span, name string, base rules.Sample, o *observer) {
	a := sp.Attributes()
	sigs := &c.spanSignals
	if sigs.verdict.Read() {
		if v, ok := a.Get(attrStragglerVerdict); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
			s := base
			s.Signal, s.Text = attrStragglerVerdict, v.Str()
			o.add(&sigs.verdict, &s)
		}
	}
	switch {
	case name == spanStep:
		c.observeStepSpan(sp, o, base)
	case sp.Status().Code() == ptrace.StatusCodeError && strings.HasPrefix(sp.Status().Message(), timedOutStatusPrefix):
		if _, collective := a.Get(semconv.AttrNCCLCollective); collective {
			s := base
			s.Signal, s.Value = signalNCCLTimedOut, 1
			o.add(&sigs.ncclTimedOut, &s)
		}
	}
}

// spanSignals are the signals read from rank spans, resolved when the
// correlator is created: the span path neither looks them up by name nor
// reads attributes whose samples no rule would keep.
type spanSignals struct {
	verdict, stepDuration, xid, throttle, ncclTimedOut rules.Signal
	numbers                                            []namedSignal // the stepSpanNumbers some rule reads, in that order
}

type namedSignal struct {
	name string
	sig  rules.Signal
}

func newSpanSignals(ev *rules.Evaluator) spanSignals {
	s := spanSignals{
		verdict:      ev.Signal(attrStragglerVerdict),
		stepDuration: ev.Signal(signalStepDuration),
		xid:          ev.Signal(semconv.AttrGPUXID),
		throttle:     ev.Signal(attrHealthThrottle),
		ncclTimedOut: ev.Signal(signalNCCLTimedOut),
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
		num(&sigs.stepDuration, signalStepDuration, sp.EndTimestamp().AsTime().Sub(sp.StartTimestamp().AsTime()).Seconds())
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
	} else if v, ok := a.Get(attrHealthXIDs); ok && v.Type() == pcommon.ValueTypeSlice {
		xids := v.Slice()
		for i := 0; i < xids.Len() && i < maxListItemsPerSpan; i++ {
			if x := xids.At(i); x.Type() == pcommon.ValueTypeInt {
				num(&sigs.xid, semconv.AttrGPUXID, float64(x.Int()))
			}
		}
	}
	if !sigs.throttle.Read() {
		// no rule reads throttle reasons
	} else if v, ok := a.Get(attrHealthThrottle); ok && v.Type() == pcommon.ValueTypeSlice {
		reasons := v.Slice()
		for i := 0; i < reasons.Len() && i < maxListItemsPerSpan; i++ {
			if r := reasons.At(i); r.Type() == pcommon.ValueTypeStr && r.Str() != "" {
				s := base
				s.Signal, s.Text = attrHealthThrottle, r.Str()
				o.add(&sigs.throttle, &s)
			}
		}
	}
}
