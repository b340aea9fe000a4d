package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// remediationExporter runs the remediation: it reads fault records, asks
// the policy and the lifecycle state what to do, and does it through the
// platform and the webhook, auditing every step.
type remediationExporter struct {
	cfg      *Config
	logger   *zap.Logger
	policy   *policy.Policy
	platform actuator.Platform
	leader   actuator.Leader
	// electAtStart: no Leader was given; Start picks one (ownership.go)
	// with findElection, following the election as id.
	electAtStart bool
	findElection func(component.Host) (component.ID, ownership.Seam, error)
	id           component.ID
	clock        clock
	sleep        func(context.Context, time.Duration) error
	audit        *audit.Log
	webhook      *webhook.Client // nil: not configured

	// lifeCtx is cancelled when Shutdown gives up waiting; it bounds the
	// releases that timers start.
	lifeCtx    context.Context
	lifeCancel context.CancelFunc
	lifeMu     sync.Mutex
	closing    bool
	inFlight   sync.WaitGroup
	// shutdownWait bounds how long Shutdown lets the work in flight run
	// before it cancels it (shutdownWait, the constant; tests shorten it).
	shutdownWait time.Duration

	// mu serialises every decision: one record (or one release) at a time,
	// so idempotency needs no finer locking. Fault records are rare.
	mu    sync.Mutex
	state *lifecycle.State
	// releaseTimers are the verification windows running, by node; a node
	// has one exactly while the state has its release pending.
	releaseTimers  map[string]*releaseTimer
	breakerAlerted bool
	// breakerWatch re-reads a breaker last read tripped (nil: none runs).
	breakerWatch *releaseTimer

	// decisions is the decision log shared by the replicas (nil: off);
	// replica names this process in it. unpublished are decisions acted
	// on whose publish failed, by key; holding, while set, collects the
	// audit entries of the decision being made.
	decisions   *decisionlog.Log
	kafkaHost   *kafkaclient.Host
	replica     string
	unpublished map[string]*unpublished
	holding     *[]audit.Entry
	// telemetry: the exporter's own counters (metadata.yaml); evictedSeen
	// is the decision log's eviction count already added to them.
	telemetry   *metadata.TelemetryBuilder
	evictedSeen int64

	// console is the fault console (nil: not configured), controller the
	// controls offered to it (console.go). capture, while set, collects
	// the audit entries written for the record being decided.
	console    console.Console
	controller *consoleController
	capture    *[]audit.Entry
	// breakerHistory: the breaker's trips and resets this exporter saw
	// (bounded), breakerKnownTripped its state as last read.
	breakerHistory      []console.BreakerEvent
	breakerKnownTripped bool
	// capq: the quarantined-share cap's refusals waiting (quarantinecap.go).
	capq capState
	// recentFaults: the fault ids recorded to the console, for
	// acknowledgements of records the state keeps nothing of (the newest
	// maxRecentFaults).
	recentFaults fifoIndex[recentFault]
	// restored: the faults of earlier lives read from the audit file, for
	// the console; nil once shown (console_restore.go).
	restored *restoredFaults
	// The repair loop (repair.go): the node agents (nil: none), the
	// repair breaker, the tick (nil: not running) and the records of each
	// node's faults for its evidence bundle.
	agent         nodeAgent
	repairs       *repairBudget
	repairWatch   *releaseTimer
	repairRecords map[string][]fault.Record
	repairNoted   map[string]string // node: the last wait audited (recordWait)
}

func newRemediationExporter(cfg *Config, set component.TelemetrySettings, deps dependencies) (*remediationExporter, error) {
	pol, err := policy.New(cfg.Policy)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, fmt.Errorf("remediationexporter: telemetry: %w", err)
	}
	e := &remediationExporter{
		telemetry:     tb,
		cfg:           cfg,
		logger:        set.Logger,
		policy:        pol,
		platform:      deps.platform,
		leader:        deps.leader,
		clock:         deps.clock,
		sleep:         deps.sleep,
		state:         lifecycle.New(cfg.Cooldown),
		releaseTimers: map[string]*releaseTimer{},
		decisions:     deps.decisions,
		kafkaHost:     deps.kafkaHost,
		replica:       deps.replica,
		unpublished:   map[string]*unpublished{},
		recentFaults:  newFIFOIndex[recentFault](maxRecentFaults),
		agent:         deps.agent,
		repairs:       &repairBudget{max: cfg.Repair.Breaker.MaxRepairs, window: cfg.Repair.Breaker.Window},
		repairRecords: map[string][]fault.Record{},
		repairNoted:   map[string]string{},
	}
	e.controller = &consoleController{e: e}
	if e.leader == nil {
		e.leader, e.electAtStart, e.findElection = alwaysLeader{self: deps.replica}, true, deps.election
	}
	if e.id = deps.id; e.id == (component.ID{}) {
		e.id = component.NewID(metadata.Type)
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
			PostsCapped: tb.RemediationWebhookPostsCapped,
		})
	}
	e.lifeCtx, e.lifeCancel = context.WithCancel(context.Background())
	e.shutdownWait = shutdownWait
	return e, nil
}

// shutdownWait is how long Shutdown waits for the records and releases in
// flight before it cancels them. The collector's context never ends, and a
// platform or webhook that does not answer must not hold the process past
// its grace period (issue 29); what is cancelled is audited as failed and
// its record, uncommitted, is decided again by the next owner.
const shutdownWait = 5 * time.Second

func (e *remediationExporter) platformName() string {
	if e.platform == nil {
		return ""
	}
	return e.platform.Name()
}

// Start rebuilds the idempotency state from the audit file of earlier
// lives, then opens it for appending, and offers its controls to the
// console when one is configured.
func (e *remediationExporter) Start(_ context.Context, host component.Host) error {
	if e.kafkaHost != nil {
		e.kafkaHost.Set(host) // the decision log's OAUTHBEARER token extension
	}
	var cons console.Console
	if e.cfg.Console != "" {
		id, err := e.cfg.consoleID()
		if err == nil {
			cons, err = console.FromHost(host, id)
		}
		if err != nil {
			return fmt.Errorf("remediationexporter: console: %w", err)
		}
	}
	if err := e.elect(host); err != nil {
		return err
	}
	e.mu.Lock()
	e.restoreFromAudit()
	e.recordQuarantined() // the nodes an earlier life left quarantined
	e.mu.Unlock()
	a, err := audit.Open(e.logger, e.cfg.AuditFile)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.audit = a
	e.console = cons
	e.showRestored()
	if e.repairOn() {
		e.recordLifecycleNodes()
		e.scheduleRepairTick()
	}
	e.mu.Unlock()
	if cons != nil {
		cons.Attach(e.controller)
	}
	// Leader election (the Kubernetes Lease) runs for the exporter's life.
	if s, ok := e.leader.(interface{ Start(context.Context) error }); ok {
		if err := s.Start(context.Background()); err != nil {
			return fmt.Errorf("remediationexporter: leader election: %w", err)
		}
	}
	if e.decisions != nil && e.enter() {
		go e.warmUp()
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
// or shutdownWait passed (then it cancels their retries), and stops pending
// returns to service: those nodes stay quarantined.
func (e *remediationExporter) Shutdown(ctx context.Context) error {
	// Start wrote e.console before anything ran concurrently; taking e.mu
	// here would wait for the batch in flight past ctx.
	if e.console != nil {
		e.console.Detach(e.controller)
	}
	e.lifeMu.Lock()
	e.closing = true
	e.lifeMu.Unlock()

	done := make(chan struct{})
	go func() {
		e.inFlight.Wait()
		close(done)
	}()
	var err error
	wait := time.NewTimer(e.shutdownWait)
	defer wait.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		e.lifeCancel() // stop the retries of what is in flight
		<-done
		err = ctx.Err()
	case <-wait.C:
		e.logger.Warn("remediation: work in flight still running at shutdown; cancelling it", zap.Duration("waited", e.shutdownWait))
		e.lifeCancel()
		<-done
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
	if e.decisions != nil {
		e.decisions.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopPendingReleases()
	if e.breakerWatch != nil {
		e.breakerWatch.stop()
		e.breakerWatch = nil
	}
	e.stopCapWatch()
	e.stopRepairTicks()
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
	return e.serialised(ctx, func(ctx context.Context) error { return e.consumeLogs(ctx, ld) })
}

// serialised runs fn as one decision: registered in flight (Shutdown
// waits for it), under e.mu, with ctx also cancelled when Shutdown gives
// up waiting. ConsumeLogs and the console's controls run through it.
func (e *remediationExporter) serialised(ctx context.Context, fn func(ctx context.Context) error) error {
	if !e.enter() {
		return errShuttingDown
	}
	defer e.inFlight.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.lifeCtx, cancel)
	defer stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	return fn(ctx)
}

// consumeLogs is ConsumeLogs under serialised.
func (e *remediationExporter) consumeLogs(ctx context.Context, ld plog.Logs) error {
	defer e.recordQuarantined() // after the batch's decisions
	e.state.Prune(e.clock.Now())
	var errs []error
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			// Only the correlator's records are acted on; a fault record
			// under any other scope did not come from it.
			fromCorrelator := sl.Scope().Name() == semconv.ScopeFaultRecords
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
				if err := e.decideShown(ctx, r); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// decideShown decides r and, with a console, shows it the record and the
// audit entries its decision wrote. Callers hold e.mu.
func (e *remediationExporter) decideShown(ctx context.Context, r fault.Record) error {
	if e.console == nil {
		return e.decide(ctx, r)
	}
	var written []audit.Entry
	e.capture = &written
	err := e.decide(ctx, r)
	e.capture = nil
	e.recordToConsole(r, written)
	return err
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

// handle decides one record and acts on it. Callers hold e.mu.
func (e *remediationExporter) handle(ctx context.Context, r fault.Record) error {
	if !e.leader.IsLeader() {
		// Not marked as seen: the leader acts, and this replica must still
		// act on the fault if it becomes the leader.
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "not the leader"))
		return nil
	}
	if r.State == fault.StateResolved {
		return e.resolve(ctx, r)
	}
	node := nodeOf(r)
	d := e.policy.Decide(r)
	repairs := e.repairOn() && len(d.Repair) > 0
	if repairs {
		// Not held for a human for its type: the loop returns the node
		// only once repaired and verified, else asks a human (rma).
		d.HoldReason = ""
	}
	if e.cfg.Kubernetes.Enabled && e.cfg.Kubernetes.DeviceTaints {
		// Smallest blast radius first: one GPU, not the node.
		d.NodeActions = policy.PreferDeviceTaint(d.NodeActions, r)
	}
	if !e.state.Open(r.ID, node, d.ReturnToService, e.clock.Now()) {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "fault already resolved (late or out-of-order record)"))
		return nil
	}
	if d.Rule == "" {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "no policy rule matched"))
		return nil
	}
	if node != "" {
		if cancelled, ok := e.state.OpenOnNode(node, r.ID); ok {
			e.releaseCancelled(cancelled, "a fault ("+r.IDType()+" "+r.ID+") opened on the node during the verification window")
		}
	}

	var errs []error
	outcome, reason, actions, err := e.quarantine(ctx, r, d, node)
	errs = append(errs, err)
	if repairs && (outcome == audit.DecisionActed || outcome == audit.DecisionDryRun) {
		e.startRepair(r, d, node)
	}
	if d.Webhook {
		errs = append(errs, e.notify(ctx, r, d, node, outcome, reason, actions))
	} else if len(d.NodeActions) == 0 {
		e.record(withDecision(withRule(entryFor(r, stepRecord), d.Rule), audit.DecisionSkipped, "policy: no action"))
	}
	return errors.Join(errs...)
}
