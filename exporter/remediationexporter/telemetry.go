package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
)

// Decision actions and the outcome of a refusal, as the decision counter
// names them (metadata.yaml). The other outcomes are the audit's
// decisions: acted, dry_run, skipped, failed.
const (
	actionQuarantine = "quarantine"
	actionRelease    = "release"
	outcomeRefused   = "refused"
	// railBreaker and railQuarantineCap are the exporter's own rails; the
	// state's are in lifecycle, the platform's are its skip outcomes.
	railBreaker       = "breaker"
	railQuarantineCap = "quarantine_cap"
)

// Platform operations, as the platform call instruments name them.
const (
	opCheck          = "check"
	opQuarantine     = "quarantine"
	opRelease        = "release"
	opBreakerTripped = "breaker_tripped"
	opBreakerAdmit   = "breaker_admit"
	opBreakerRefund  = "breaker_refund"
)

// countDecision adds one quarantine or release decision. rail is set only
// when outcome is refused. Callers hold e.mu.
func (e *remediationExporter) countDecision(ctx context.Context, action, outcome, rail string) {
	attrs := []attribute.KeyValue{
		attribute.String(metadata.TelemetryAttrAction, action),
		attribute.String(metadata.TelemetryAttrOutcome, outcome),
	}
	if outcome == outcomeRefused {
		attrs = append(attrs, attribute.String(metadata.TelemetryAttrRail, rail))
	}
	e.telemetry.RemediationDecisions.Add(context.WithoutCancel(ctx), 1, metric.WithAttributeSet(attribute.NewSet(attrs...)))
}

// railOf is the rail a platform's skip outcome names: the outcome without
// its skip_ prefix (foreign, excluded, not_found, no_gpu, not_ours).
func railOf(o actuator.Outcome) string {
	return strings.TrimPrefix(string(o), "skip_")
}

// timedCall wraps one platform call so that each attempt records its
// latency and, when it fails, an error, by platform and operation. The
// latency is the wall clock's: e.clock drives timers, not measurements.
func timedCall[T any](e *remediationExporter, operation string, op func(context.Context) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		start := time.Now()
		res, err := op(ctx)
		e.observeCall(ctx, operation, time.Since(start), err)
		return res, err
	}
}

// observeCall records one platform call.
func (e *remediationExporter) observeCall(ctx context.Context, operation string, took time.Duration, err error) {
	ctx = context.WithoutCancel(ctx) // a call cut short by its context is still a call
	set := metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrPlatform, e.platformName()),
		attribute.String(metadata.TelemetryAttrOperation, operation)))
	e.telemetry.RemediationPlatformCallDuration.Record(ctx, took.Seconds(), set)
	if err != nil {
		e.telemetry.RemediationPlatformCallErrors.Add(ctx, 1, set)
	}
}

// breakerCall is timedCall for the breaker's calls that return no value.
func (e *remediationExporter) breakerCall(ctx context.Context, operation string, op func(context.Context) error) error {
	_, err := timedCall(e, operation, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })(ctx)
	return err
}

// recordBreaker records the breaker's state as last read: 1 tripped, 0
// closed.
func (e *remediationExporter) recordBreaker(ctx context.Context, tripped bool) {
	v := int64(0)
	if tripped {
		v = 1
	}
	e.telemetry.RemediationBreakerTripped.Record(context.WithoutCancel(ctx), v,
		metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrPlatform, e.platformName()))))
}

// breakerPollInterval is how often a breaker last read tripped is read
// again: the breaker is otherwise read only when a fault asks for a
// quarantine, and its gauge (and the alert on it) must clear once a human
// resets it.
const breakerPollInterval = time.Minute

// watchBreaker starts re-reading the breaker until it reads closed, unless
// a watch runs already. Callers hold e.mu.
func (e *remediationExporter) watchBreaker() {
	if e.breakerWatch != nil || e.platform == nil {
		return
	}
	w := &releaseTimer{}
	w.stop = e.clock.AfterFunc(breakerPollInterval, func() { e.pollBreaker(w) })
	e.breakerWatch = w
}

// pollBreaker runs on the watch's timer: it records the breaker's state,
// and watches on while it is tripped or cannot be read.
func (e *remediationExporter) pollBreaker(w *releaseTimer) {
	if !e.enter() {
		return
	}
	defer e.inFlight.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.breakerWatch != w {
		return // stopped meanwhile
	}
	e.breakerWatch = nil
	ctx, cancel := context.WithTimeout(e.lifeCtx, breakerPollInterval)
	defer cancel()
	tripped, err := timedCall(e, opBreakerTripped, e.platform.Breaker().Tripped)(ctx)
	if err == nil {
		e.recordBreaker(ctx, tripped)
		e.breakerRead(tripped, "")
	}
	if err != nil || tripped {
		e.watchBreaker()
		return
	}
	e.breakerAlerted = false // a human reset it: the next trip pages again
	e.capRoomMaybe()
}

// recordQuarantined records how many nodes the exporter holds, after a
// decision changed the state. Callers hold e.mu.
func (e *remediationExporter) recordQuarantined() {
	e.telemetry.RemediationQuarantinedNodes.Record(context.Background(), int64(e.state.QuarantinedNodes()),
		metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrPlatform, e.platformName()))))
	e.recordCapWaiting()
}

// Outcomes shared with the audit, named here so the counting sites read
// as the audit's.
const (
	outcomeActed   = audit.DecisionActed
	outcomeDryRun  = audit.DecisionDryRun
	outcomeSkipped = audit.DecisionSkipped
	outcomeFailed  = audit.DecisionFailed
)
