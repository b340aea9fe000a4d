package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// CorrelatorScopeName is the instrumentation scope of the faultcorrelator's
// fault records: processor/faultcorrelator/internal/metadata.ScopeName,
// repeated here because that package is internal to the correlator. Only
// records under this scope are acted on.
const CorrelatorScopeName = "github.com/otelcol-gpu/otelcol-gpu/processor/faultcorrelator"

// Retention of per-fault state: long enough to recognise redeliveries and
// late records of a fault, bounded so that state does not grow forever.
const (
	resolvedRetention = 24 * time.Hour
	openRetention     = 7 * 24 * time.Hour
	pruneEvery        = time.Minute
)

// Audit steps.
const (
	stepRecord     = "record"
	stepQuarantine = "quarantine"
	stepRelease    = "release"
	stepWebhook    = "webhook"
)

// clock is time, injectable so tests can fire the verification window.
type clock interface {
	Now() time.Time
	// AfterFunc runs f after d; the returned func stops it and reports
	// whether it stopped it before it ran.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// alwaysLeader is the Leader when none is configured: a single replica, or
// a platform without leader election. Documented in README.md.
type alwaysLeader struct{}

func (alwaysLeader) IsLeader() bool { return true }

// dependencies are what the factory (or a test) plugs in.
type dependencies struct {
	platform actuator.Platform // nil: no platform, webhook only
	leader   actuator.Leader   // nil: alwaysLeader
	clock    clock             // nil: realClock
	// sleep waits between attempts (platform and webhook); nil waits on a
	// timer honouring ctx.
	sleep func(ctx context.Context, d time.Duration) error
}

// faultState is what the exporter remembers of one fault id.
type faultState struct {
	node       string
	resolved   bool
	severity   fault.Severity // the highest severity a webhook was sent for
	webhooked  bool
	applied    []actuator.Action // node actions done (or, in dry run, logged) for it
	ours       bool              // this exporter quarantined its node for it
	release    bool              // the policy lets it return the node to service
	lastRecord time.Time
}

// nodeState is what the exporter remembers of one node.
type nodeState struct {
	openFaults    map[string]struct{} // open faults seen on the node, acted on or not
	ourFaults     map[string]struct{} // faults it quarantined the node for
	actions       []actuator.Action   // node actions it holds on the node
	hold          string              // why the node waits for a human; never released automatically
	lastRelease   time.Time
	stopRelease   func() bool // pending return to service
	releaseFaults []string
}

type remediationExporter struct {
	cfg      *Config
	logger   *zap.Logger
	policy   *policy.Policy
	platform actuator.Platform
	leader   actuator.Leader
	clock    clock
	sleep    func(context.Context, time.Duration) error
	audit    *audit.Log
	webhook  *webhook.Client // nil: not configured

	// lifeCtx is cancelled when Shutdown gives up waiting; it bounds the
	// releases that timers start.
	lifeCtx    context.Context
	lifeCancel context.CancelFunc
	lifeMu     sync.Mutex
	closing    bool
	inFlight   sync.WaitGroup

	// mu serialises every decision: one record (or one release) at a time,
	// so idempotency needs no finer locking. Fault records are rare.
	mu             sync.Mutex
	faults         map[string]*faultState
	nodes          map[string]*nodeState
	breakerAlerted bool
	lastPrune      time.Time
}

func newRemediationExporter(cfg *Config, set component.TelemetrySettings, deps dependencies) (*remediationExporter, error) {
	pol, err := policy.New(cfg.Policy)
	if err != nil {
		return nil, err
	}
	e := &remediationExporter{
		cfg:      cfg,
		logger:   set.Logger,
		policy:   pol,
		platform: deps.platform,
		leader:   deps.leader,
		clock:    deps.clock,
		sleep:    deps.sleep,
		faults:   map[string]*faultState{},
		nodes:    map[string]*nodeState{},
	}
	if e.leader == nil {
		e.leader = alwaysLeader{}
	}
	if e.clock == nil {
		e.clock = realClock{}
	}
	if e.sleep == nil {
		e.sleep = webhook.SleepContext
	}
	if cfg.Webhook.Endpoint != "" {
		e.webhook = webhook.New(cfg.Webhook, webhook.Options{
			InitialBackoff: cfg.Backoff.Initial, MaxBackoff: cfg.Backoff.Max, Sleep: e.sleep, Now: e.clock.Now,
		})
	}
	e.lifeCtx, e.lifeCancel = context.WithCancel(context.Background())
	return e, nil
}

func (e *remediationExporter) platformName() string {
	if e.platform == nil {
		return ""
	}
	return e.platform.Name()
}

// Start rebuilds the idempotency state from the audit file of earlier
// lives, then opens it for appending.
func (e *remediationExporter) Start(context.Context, component.Host) error {
	e.mu.Lock()
	e.restoreFromAudit()
	e.mu.Unlock()
	a, err := audit.Open(e.logger, e.cfg.AuditFile)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.audit = a
	e.mu.Unlock()
	// Leader election (the Kubernetes Lease) runs for the exporter's life.
	if s, ok := e.leader.(interface{ Start(context.Context) error }); ok {
		if err := s.Start(context.Background()); err != nil {
			return fmt.Errorf("remediationexporter: leader election: %w", err)
		}
	}
	mode := "acting"
	if e.cfg.DryRun {
		mode = "dry run: logging actions, calling no platform and no webhook"
	}
	e.logger.Info("remediation exporter started", zap.String("mode", mode),
		zap.String("platform", e.platformName()), zap.Bool("webhook", e.webhook != nil))
	return nil
}

// Shutdown waits for the records and releases in flight, until ctx is done
// (then it cancels their retries), and stops pending returns to service: those
// nodes stay quarantined.
func (e *remediationExporter) Shutdown(ctx context.Context) error {
	e.lifeMu.Lock()
	e.closing = true
	e.lifeMu.Unlock()

	done := make(chan struct{})
	go func() {
		e.inFlight.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		e.lifeCancel() // stop the retries of what is in flight
		<-done
		err = ctx.Err()
	}
	e.lifeCancel()
	if e.webhook != nil {
		e.webhook.Close()
	}
	// Give up leadership first, so another replica takes over at once.
	if s, ok := e.leader.(interface{ Stop() }); ok {
		s.Stop()
	}
	if c, ok := e.platform.(interface{ Close() }); ok {
		c.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, n := range e.nodes {
		if n.stopRelease != nil && n.stopRelease() {
			e.record(audit.Entry{Decision: audit.DecisionSkipped, Step: stepRelease, Node: name, Platform: e.platformName(),
				Reason: "shutdown before the verification window ended: the node stays quarantined"})
		}
		n.stopRelease = nil
	}
	if e.audit != nil {
		err = errors.Join(err, e.audit.Close())
	}
	return err
}

// Capabilities: the exporter reads records only.
func (e *remediationExporter) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// enter registers work in flight; false once shutting down.
func (e *remediationExporter) enter() bool {
	e.lifeMu.Lock()
	defer e.lifeMu.Unlock()
	if e.closing {
		return false
	}
	e.inFlight.Add(1)
	return true
}

var errShuttingDown = errors.New("remediationexporter: shutting down")

// ConsumeLogs decides and acts on every fault record in ld before it
// returns. It is idempotent by fault.id, so a redelivered batch acts once.
// The error joins the platform and webhook failures: a retry of the batch
// retries only those.
func (e *remediationExporter) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if !e.enter() {
		return errShuttingDown
	}
	defer e.inFlight.Done()
	// The exporter's lifetime bounds the work too: Shutdown cancels it
	// once its own deadline passes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.lifeCtx, cancel)
	defer stop()

	e.mu.Lock()
	defer e.mu.Unlock()
	e.prune()
	var errs []error
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			fromCorrelator := sl.Scope().Name() == CorrelatorScopeName
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if err := ctx.Err(); err != nil {
					return errors.Join(append(errs, err)...)
				}
				lr := lrs.At(k)
				if !fromCorrelator {
					e.record(audit.Entry{Decision: audit.DecisionSkipped, Step: stepRecord,
						Reason: fmt.Sprintf("not a correlator record: scope %q", sl.Scope().Name())})
					continue
				}
				r, err := fault.FromLogRecord(lr)
				if err != nil {
					e.record(audit.Entry{Decision: audit.DecisionSkipped, Step: stepRecord,
						Reason: "not a correlator record: " + err.Error()})
					continue
				}
				if err := e.handle(ctx, r); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// record writes an audit entry, stamped now. Callers hold e.mu.
func (e *remediationExporter) record(entry audit.Entry) {
	if entry.Time.IsZero() {
		entry.Time = e.clock.Now().UTC()
	}
	if e.audit == nil { // ConsumeLogs before Start (tests of the core only)
		e.audit, _ = audit.Open(e.logger, "")
	}
	_ = e.audit.Record(entry)
}

func entryFor(r fault.Record, step string) audit.Entry {
	return audit.Entry{Step: step, FaultID: r.ID, FaultType: r.IDType(), State: string(r.State), Severity: string(r.Severity)}
}

// nodeOf is the node a record's actions are for: host.name, or the key of a
// node or NVLink-domain entity.
func nodeOf(r fault.Record) string {
	if r.HostName != "" {
		return r.HostName
	}
	if r.Entity.Kind == fault.EntityNode || r.Entity.Kind == fault.EntityNVLinkDomain {
		return r.Entity.Key
	}
	return ""
}

func (e *remediationExporter) node(name string) *nodeState {
	n := e.nodes[name]
	if n == nil {
		n = &nodeState{openFaults: map[string]struct{}{}, ourFaults: map[string]struct{}{}}
		e.nodes[name] = n
	}
	return n
}

// handle decides one record. Callers hold e.mu.
func (e *remediationExporter) handle(ctx context.Context, r fault.Record) error {
	if !e.leader.IsLeader() {
		// Not marked as seen: the leader acts, and this replica must still
		// act on the fault if it becomes the leader.
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "not the leader"))
		return nil
	}
	fs := e.faults[r.ID]
	if r.State == fault.StateResolved {
		return e.resolve(ctx, r, fs)
	}
	if fs != nil && fs.resolved {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "fault already resolved (late or out-of-order record)"))
		return nil
	}
	node := nodeOf(r)
	if fs == nil {
		fs = &faultState{node: node}
		e.faults[r.ID] = fs
	}
	fs.lastRecord = e.clock.Now()
	d := e.policy.Decide(r)
	if e.cfg.Kubernetes.Enabled && e.cfg.Kubernetes.DeviceTaints {
		// Smallest blast radius first: one GPU, not the node.
		d.NodeActions = policy.PreferDeviceTaint(d.NodeActions, r)
	}
	fs.release = d.ReturnToService
	if d.Rule == "" {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "no policy rule matched"))
		return nil
	}
	if node != "" {
		n := e.node(node)
		n.openFaults[r.ID] = struct{}{}
		e.cancelRelease(node, n, "a fault ("+r.IDType()+" "+r.ID+") opened on the node during the verification window")
	}

	var errs []error
	outcome, reason, actions, err := e.quarantine(ctx, r, d, fs, node)
	errs = append(errs, err)
	if d.Webhook {
		errs = append(errs, e.notify(ctx, r, d, fs, node, outcome, reason, actions))
	} else if len(d.NodeActions) == 0 {
		e.record(withDecision(withRule(entryFor(r, stepRecord), d.Rule), audit.DecisionSkipped, "policy: no action"))
	}
	return errors.Join(errs...)
}

func withDecision(e audit.Entry, decision, reason string) audit.Entry {
	e.Decision, e.Reason = decision, reason
	return e
}

func withRule(e audit.Entry, rule string) audit.Entry {
	e.Rule = rule
	return e
}

func actionNames(as []actuator.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}

func missing(want, have []actuator.Action) []actuator.Action {
	var out []actuator.Action
	for _, a := range want {
		if !slices.Contains(have, a) {
			out = append(out, a)
		}
	}
	return out
}

func addActions(have []actuator.Action, more []actuator.Action) []actuator.Action {
	for _, a := range more {
		if !slices.Contains(have, a) {
			have = append(have, a)
		}
	}
	return have
}

// quarantine applies the node actions the decision adds for this fault.
// It returns the outcome for the webhook payload (acted, dry_run, skipped,
// failed, or "" when there was nothing to do), why, and the actions.
func (e *remediationExporter) quarantine(ctx context.Context, r fault.Record, d policy.Decision, fs *faultState, node string) (string, string, []string, error) {
	want := policy.ForPlatform(d.NodeActions, e.platformName())
	if len(want) == 0 {
		return "", "", nil, nil
	}
	entry := withRule(entryFor(r, stepQuarantine), d.Rule)
	entry.Node, entry.Platform = node, e.platformName()
	toApply := missing(want, fs.applied)
	entry.Actions = actionNames(toApply)
	skip := func(reason string) (string, string, []string, error) {
		e.record(withDecision(entry, audit.DecisionSkipped, reason))
		return audit.DecisionSkipped, reason, entry.Actions, nil
	}
	switch {
	case len(toApply) == 0:
		// One fault id acts once: a duplicate, a redelivery or an update
		// that asks for nothing new.
		entry.Actions = actionNames(want)
		return skip("duplicate: fault already acted on")
	case node == "":
		return skip("the record names no node")
	}
	n := e.node(node)
	now := e.clock.Now()
	if len(n.actions) == 0 && !n.lastRelease.IsZero() && now.Sub(n.lastRelease) < e.cfg.Cooldown {
		return skip(fmt.Sprintf("cooldown: returned to service %s ago (cooldown %s)", now.Sub(n.lastRelease).Round(time.Second), e.cfg.Cooldown))
	}
	req := actuator.Request{Node: node, GPUUUID: r.GPUUUID, FaultID: r.ID, FaultType: string(r.Type),
		Severity: string(r.Severity), Reason: r.IDType() + " " + r.ID, Actions: toApply}

	if e.cfg.DryRun || e.platform == nil {
		platform := e.platformName()
		if platform == "" {
			platform = "no platform configured"
		}
		reason := fmt.Sprintf("would call Quarantine on %s: node=%s actions=[%s] reason=%q gpu=%q",
			platform, node, strings.Join(entry.Actions, ","), req.Reason, req.GPUUUID)
		if !e.cfg.DryRun {
			// Acting, but no platform: the webhook is the only output.
			return skip("no platform configured: " + reason)
		}
		fs.applied = addActions(fs.applied, toApply)
		e.adopt(fs, n, r, d, toApply)
		e.record(withDecision(entry, audit.DecisionDryRun, reason))
		return audit.DecisionDryRun, reason, entry.Actions, nil
	}

	// The breaker is consulted before every quarantine; once tripped it
	// stays so until a human resets it.
	breaker := e.platform.Breaker()
	tripped, err := breaker.Tripped(ctx)
	if err == nil && !tripped {
		e.breakerAlerted = false // a human reset it: alert on the next trip
		var admitted bool
		admitted, err = breaker.Admit(ctx, node, now)
		tripped = err == nil && !admitted
	}
	if err != nil {
		reason := "circuit breaker unavailable: " + err.Error()
		e.record(withDecision(entry, audit.DecisionFailed, reason))
		return audit.DecisionFailed, reason, entry.Actions, fmt.Errorf("remediationexporter: fault %s: %w", r.ID, err)
	}
	if tripped {
		outcome, reason, actions, _ := skip("circuit breaker tripped: quarantining stopped until a human resets it")
		return outcome, reason, actions, e.alertBreaker(ctx, r, node)
	}

	res, attempts, err := e.retry(ctx, func(ctx context.Context) (actuator.Result, error) { return e.platform.Quarantine(ctx, req) })
	entry.Attempts, entry.Outcome = attempts, string(res.Outcome)
	if err != nil {
		// Not marked as applied: the next record of the fault (or a
		// redelivery of this batch) tries again.
		reason := err.Error()
		e.record(withDecision(entry, audit.DecisionFailed, reason))
		return audit.DecisionFailed, reason, entry.Actions, fmt.Errorf("remediationexporter: quarantine %s for fault %s: %w", node, r.ID, err)
	}
	fs.applied = addActions(fs.applied, toApply)
	switch res.Outcome {
	case actuator.Applied, actuator.AlreadyDone:
		e.adopt(fs, n, r, d, toApply)
		e.record(withDecision(entry, audit.DecisionActed, res.Detail))
		return audit.DecisionActed, res.Detail, entry.Actions, nil
	default: // foreign, excluded, not found: left alone, once for this fault
		reason := string(res.Outcome)
		if res.Detail != "" {
			reason += ": " + res.Detail
		}
		return skip(reason)
	}
}

// adopt records that the exporter holds toApply on the node for fs.
func (e *remediationExporter) adopt(fs *faultState, n *nodeState, r fault.Record, d policy.Decision, toApply []actuator.Action) {
	fs.ours = true
	n.ourFaults[r.ID] = struct{}{}
	n.actions = addActions(n.actions, toApply)
	if d.HoldReason != "" && n.hold == "" {
		n.hold = d.HoldReason + " (fault " + r.ID + ")"
	}
}

// retry calls op up to max_attempts times with exponential backoff.
func (e *remediationExporter) retry(ctx context.Context, op func(context.Context) (actuator.Result, error)) (actuator.Result, int, error) {
	backoff := e.cfg.Backoff.Initial
	for attempt := 1; ; attempt++ {
		res, err := op(ctx)
		if err == nil || attempt >= e.cfg.MaxAttempts || ctx.Err() != nil {
			return res, attempt, err
		}
		if serr := e.sleep(ctx, backoff); serr != nil {
			return res, attempt, errors.Join(err, serr)
		}
		backoff = min(2*backoff, e.cfg.Backoff.Max)
	}
}

// alertBreaker pages once per trip.
func (e *remediationExporter) alertBreaker(ctx context.Context, r fault.Record, node string) error {
	if e.breakerAlerted {
		return nil
	}
	entry := entryFor(r, stepWebhook)
	entry.Node, entry.Platform = node, e.platformName()
	if e.webhook == nil {
		e.breakerAlerted = true
		e.record(withDecision(entry, audit.DecisionSkipped, "breaker tripped; webhook not configured: page a human another way"))
		return nil
	}
	p := webhook.Payload{Route: "page", Fault: webhook.FaultFromRecord(r), Decision: webhook.Decision{
		Request: string(policy.RequestBreakerTripped), Outcome: audit.DecisionSkipped, Actions: []string{},
		Platform: e.platformName(), Node: node,
		Reason: "breaker tripped: the exporter stopped quarantining nodes; a human must check the cluster and reset the breaker",
	}}
	if err := e.post(ctx, entry, p, r.ID+"/breaker_tripped"); err != nil {
		return err
	}
	e.breakerAlerted = true
	return nil
}

// notify sends the record and the node step's outcome to the webhook: once
// per fault, again only when its severity rises (the route changes).
func (e *remediationExporter) notify(ctx context.Context, r fault.Record, d policy.Decision, fs *faultState, node, outcome, reason string, actions []string) error {
	entry := withRule(entryFor(r, stepWebhook), d.Rule)
	entry.Node, entry.Platform = node, e.platformName()
	if fs.webhooked && !higher(r.Severity, fs.severity) {
		e.record(withDecision(entry, audit.DecisionSkipped, "duplicate: webhook already sent for this fault"))
		return nil
	}
	if outcome == "" {
		outcome = "none"
	}
	if actions == nil {
		actions = []string{}
	}
	p := webhook.Payload{Route: policy.Route(r.Severity), Fault: webhook.FaultFromRecord(r), Decision: webhook.Decision{
		Request: string(d.Request), Outcome: outcome, Actions: actions, Platform: e.platformName(), Node: node,
		Reason: reason, Rule: d.Rule, DryRun: e.cfg.DryRun,
	}}
	if e.cfg.DryRun {
		body, _ := json.Marshal(p)
		fs.webhooked, fs.severity = true, r.Severity
		e.record(withDecision(entry, audit.DecisionDryRun, "would post to the webhook: "+string(body)))
		return nil
	}
	if e.webhook == nil {
		e.record(withDecision(entry, audit.DecisionSkipped, "webhook not configured"))
		return nil
	}
	if err := e.post(ctx, entry, p, r.ID+"/"+string(r.State)+"/"+string(d.Request)); err != nil {
		return err
	}
	fs.webhooked, fs.severity = true, r.Severity
	return nil
}

func (e *remediationExporter) post(ctx context.Context, entry audit.Entry, p webhook.Payload, delivery string) error {
	p.SentAt = e.clock.Now().UTC().Format(time.RFC3339Nano)
	body, err := json.Marshal(p)
	if err != nil {
		e.record(withDecision(entry, audit.DecisionFailed, err.Error()))
		return err
	}
	attempts, err := e.webhook.Send(ctx, body, delivery)
	entry.Attempts = attempts
	if err != nil {
		e.record(withDecision(entry, audit.DecisionFailed, err.Error()))
		return fmt.Errorf("remediationexporter: webhook for fault %s: %w", entry.FaultID, err)
	}
	e.record(withDecision(entry, audit.DecisionActed, "posted ("+p.Route+", "+p.Decision.Request+")"))
	return nil
}

// higher reports whether a is a more urgent severity than b (P1 < P2 ...).
func higher(a, b fault.Severity) bool { return a < b }

// resolve handles a resolved record: bookkeeping, a resolution webhook, and
// a return to service once every fault on the node is resolved.
func (e *remediationExporter) resolve(ctx context.Context, r fault.Record, fs *faultState) error {
	if fs == nil {
		// Resolved before its open arrived: remember it, so the late open
		// does nothing.
		e.faults[r.ID] = &faultState{node: nodeOf(r), resolved: true, lastRecord: e.clock.Now()}
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "resolved before any open record (out of order): nothing to undo"))
		return nil
	}
	if fs.resolved {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "duplicate: fault already resolved"))
		return nil
	}
	fs.resolved = true
	fs.lastRecord = e.clock.Now()
	var err error
	if fs.webhooked {
		d := policy.Decision{Rule: "", Request: policy.RequestNotify}
		err = e.notifyResolved(ctx, r, d, fs)
	}
	if fs.node != "" {
		if n := e.nodes[fs.node]; n != nil {
			delete(n.openFaults, r.ID)
			e.maybeScheduleRelease(fs.node, n, r)
		}
	}
	return err
}

func (e *remediationExporter) notifyResolved(ctx context.Context, r fault.Record, d policy.Decision, fs *faultState) error {
	entry := entryFor(r, stepWebhook)
	entry.Node = fs.node
	p := webhook.Payload{Route: policy.Route(r.Severity), Fault: webhook.FaultFromRecord(r), Decision: webhook.Decision{
		Request: string(d.Request), Outcome: "resolved", Actions: []string{}, Platform: e.platformName(), Node: fs.node,
		DryRun: e.cfg.DryRun,
	}}
	switch {
	case e.cfg.DryRun:
		e.record(withDecision(entry, audit.DecisionDryRun, "would post the resolution to the webhook"))
		return nil
	case e.webhook == nil:
		return nil
	}
	return e.post(ctx, entry, p, r.ID+"/resolved/notify")
}

// maybeScheduleRelease starts the verification window for a node whose
// faults are all resolved, where every fault it was quarantined for allows
// a return to service and none waits for a human.
func (e *remediationExporter) maybeScheduleRelease(name string, n *nodeState, r fault.Record) {
	if len(n.ourFaults) == 0 {
		return
	}
	entry := entryFor(r, stepRelease)
	entry.Node, entry.Platform, entry.Actions = name, e.platformName(), actionNames(n.actions)
	if n.hold != "" {
		e.record(withDecision(entry, audit.DecisionSkipped, "waits for a human: "+n.hold))
		return
	}
	var ids []string
	for id := range n.ourFaults {
		ids = append(ids, id)
		if fs := e.faults[id]; fs == nil || !fs.release {
			e.record(withDecision(entry, audit.DecisionSkipped, "the policy does not return the node to service after fault "+id))
			return
		}
	}
	if len(n.openFaults) > 0 {
		e.record(withDecision(entry, audit.DecisionSkipped, fmt.Sprintf("node has %d other open fault(s)", len(n.openFaults))))
		return
	}
	for _, id := range ids {
		if !e.faults[id].resolved {
			return // an update of ours still open (kept out of openFaults only when its node changed)
		}
	}
	if n.stopRelease != nil {
		return
	}
	sort.Strings(ids)
	n.releaseFaults = ids
	n.stopRelease = e.clock.AfterFunc(e.cfg.VerificationWindow, func() { e.releaseAfterWindow(name) })
	e.logger.Info("remediation: return to service scheduled after the verification window",
		zap.String("node", name), zap.Duration("verification_window", e.cfg.VerificationWindow), zap.Strings("fault.ids", ids))
}

func (e *remediationExporter) cancelRelease(name string, n *nodeState, why string) {
	if n.stopRelease == nil {
		return
	}
	n.stopRelease()
	n.stopRelease = nil
	e.record(audit.Entry{Decision: audit.DecisionSkipped, Step: stepRelease, Node: name, Platform: e.platformName(),
		Actions: actionNames(n.actions), Reason: "return to service cancelled: " + why})
}

// releaseAfterWindow runs on the verification window's timer.
func (e *remediationExporter) releaseAfterWindow(name string) {
	if !e.enter() {
		return
	}
	defer e.inFlight.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.nodes[name]
	if n == nil || n.stopRelease == nil {
		return // cancelled meanwhile
	}
	n.stopRelease = nil
	entry := audit.Entry{Step: stepRelease, Node: name, Platform: e.platformName(), Actions: actionNames(n.actions),
		FaultID: strings.Join(n.releaseFaults, ",")}
	if !e.leader.IsLeader() {
		e.record(withDecision(entry, audit.DecisionSkipped, "not the leader: the node stays quarantined"))
		return
	}
	// Every fault of ours goes with the request: the platform may know the
	// quarantine under any one of them (Slurm's reason names only the first).
	req := actuator.Request{Node: name, FaultID: n.releaseFaults[0], FaultIDs: slices.Clone(n.releaseFaults), Actions: slices.Clone(n.actions),
		Reason: "resolved: " + strings.Join(n.releaseFaults, ",")}
	if e.cfg.DryRun || e.platform == nil {
		e.record(withDecision(entry, audit.DecisionDryRun, fmt.Sprintf("would call Release on %s: node=%s actions=[%s]",
			e.platformName(), name, strings.Join(entry.Actions, ","))))
		e.forgetQuarantine(n, e.clock.Now())
		return
	}
	res, attempts, err := e.retry(e.lifeCtx, func(ctx context.Context) (actuator.Result, error) { return e.platform.Release(ctx, req) })
	entry.Attempts, entry.Outcome = attempts, string(res.Outcome)
	switch {
	case err != nil:
		// Stays quarantined: safe. A human (or the next resolved fault on
		// the node) takes it from here.
		e.record(withDecision(entry, audit.DecisionFailed, err.Error()))
	case res.Outcome == actuator.Applied || res.Outcome == actuator.AlreadyDone:
		e.record(withDecision(entry, audit.DecisionActed, res.Detail))
		e.forgetQuarantine(n, e.clock.Now())
	default: // not ours any more (a human took over): forget it, touch nothing
		e.record(withDecision(entry, audit.DecisionSkipped, string(res.Outcome)+": "+res.Detail))
		e.forgetQuarantine(n, e.clock.Now())
	}
}

func (e *remediationExporter) forgetQuarantine(n *nodeState, releasedAt time.Time) {
	for id := range n.ourFaults {
		if fs := e.faults[id]; fs != nil {
			fs.ours = false
		}
	}
	n.ourFaults = map[string]struct{}{}
	n.actions = nil
	n.releaseFaults = nil
	n.lastRelease = releasedAt
}

// prune forgets faults long past and idle nodes, so state stays bounded.
// Callers hold e.mu.
func (e *remediationExporter) prune() {
	now := e.clock.Now()
	if now.Sub(e.lastPrune) < pruneEvery {
		return
	}
	e.lastPrune = now
	for id, fs := range e.faults {
		age := now.Sub(fs.lastRecord)
		if fs.ours {
			continue // still holds a node (open, in its verification window, or waiting for a human)
		}
		if (fs.resolved && age > resolvedRetention) || age > openRetention {
			delete(e.faults, id)
			if n := e.nodes[fs.node]; n != nil && !fs.ours {
				delete(n.openFaults, id)
			}
		}
	}
	for name, n := range e.nodes {
		if len(n.openFaults) == 0 && len(n.ourFaults) == 0 && n.stopRelease == nil && n.hold == "" &&
			now.Sub(n.lastRelease) > e.cfg.Cooldown {
			delete(e.nodes, name)
		}
	}
}

// heldSinceRestart is the hold on a node quarantined by an earlier life:
// the audit file does not say whether the policy allowed its return to
// service, nor which other faults were open on it, so a human decides.
const heldSinceRestart = "quarantined before the exporter restarted"

// restoreFromAudit rebuilds, from the audit file of earlier lives, what
// keeps the exporter idempotent across a restart: per fault id the node
// actions applied, the webhook sent (and its severity) and whether it is
// resolved; per node the quarantine it holds and its last return to
// service. Entries older than the fault state's retention are ignored, so
// the state is bounded as in one life. Unreadable lines are skipped (Replay
// warns); nothing here fails start-up. Callers hold e.mu.
func (e *remediationExporter) restoreFromAudit() {
	if e.cfg.AuditFile == "" {
		return
	}
	horizon := e.clock.Now().Add(-openRetention)
	replayed, err := audit.Replay(e.logger, e.cfg.AuditFile, func(entry audit.Entry) {
		if entry.Time.Before(horizon) { // a zero time too: it cannot be aged
			return
		}
		e.restore(entry)
	})
	if err != nil {
		e.logger.Warn("audit file not read to its end: faults acted on before the restart may be acted on again",
			zap.String("file", e.cfg.AuditFile), zap.Error(err))
	}
	held := 0
	for _, n := range e.nodes {
		if len(n.ourFaults) > 0 {
			held++
			if n.hold == "" {
				n.hold = heldSinceRestart
			}
		}
	}
	if replayed > 0 {
		e.logger.Info("remediation state restored from the audit file", zap.String("file", e.cfg.AuditFile),
			zap.Int("entries", replayed), zap.Int("faults", len(e.faults)), zap.Int("quarantined_nodes", held))
	}
}

// restore applies one audit entry of an earlier life to the state, as the
// decision that wrote it did. Callers hold e.mu.
func (e *remediationExporter) restore(entry audit.Entry) {
	// Only what this life would itself have done counts: a dry run did
	// nothing, so it does not stand for an action once the exporter acts.
	done := entry.Decision == audit.DecisionActed || (entry.Decision == audit.DecisionDryRun && e.cfg.DryRun)
	switch {
	case entry.Step == stepQuarantine && entry.FaultID != "" && entry.Node != "" && entry.Platform == e.platformName():
		// The platform's final answers (foreign, excluded, not found) are
		// skipped entries with an outcome: applied for the fault, not ours.
		final := entry.Decision == audit.DecisionSkipped && entry.Outcome != ""
		if !done && !final {
			break
		}
		actions := make([]actuator.Action, len(entry.Actions))
		for i, a := range entry.Actions {
			actions[i] = actuator.Action(a)
		}
		fs := e.restoredFault(entry)
		fs.applied = addActions(fs.applied, actions)
		if done {
			n := e.node(entry.Node)
			fs.ours = true
			n.ourFaults[entry.FaultID] = struct{}{}
			n.actions = addActions(n.actions, actions)
		}
	case entry.Step == stepWebhook && done && entry.Rule != "" && entry.State != string(fault.StateResolved):
		// A rule names a fault's own webhook (not the breaker's page).
		fs := e.restoredFault(entry)
		sev := fault.Severity(entry.Severity)
		if !fs.webhooked || higher(sev, fs.severity) {
			fs.severity = sev
		}
		fs.webhooked = true
	case entry.Step == stepRelease && entry.Node != "" &&
		(done || (entry.Decision == audit.DecisionSkipped && entry.Outcome != "")):
		// Returned to service, or no longer ours (a human took over).
		e.forgetQuarantine(e.node(entry.Node), entry.Time)
	}
	if entry.State == string(fault.StateResolved) && entry.FaultID != "" {
		e.restoredFault(entry).resolved = true
	}
}

// restoredFault is the state of entry's fault, created when missing.
func (e *remediationExporter) restoredFault(entry audit.Entry) *faultState {
	fs := e.faults[entry.FaultID]
	if fs == nil {
		fs = &faultState{}
		e.faults[entry.FaultID] = fs
	}
	if entry.Node != "" {
		fs.node = entry.Node
	}
	if entry.Time.After(fs.lastRecord) {
		fs.lastRecord = entry.Time
	}
	return fs
}
