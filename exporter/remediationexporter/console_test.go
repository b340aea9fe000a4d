package remediationexporter

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// recordingConsole is a console.Console that keeps what it is given: the
// real extension is tested in its own package.
type recordingConsole struct {
	component.StartFunc
	component.ShutdownFunc
	mu         sync.Mutex
	faults     []console.Fault
	controller console.Controller
	detached   int
}

func (c *recordingConsole) RecordFault(f console.Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, f)
}

func (c *recordingConsole) RecordStep(console.Step) {}

func (c *recordingConsole) Attach(ctl console.Controller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.controller = ctl
}

func (c *recordingConsole) Detach(ctl console.Controller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.controller == ctl {
		c.controller = nil
		c.detached++
	}
}

func (c *recordingConsole) recorded() []console.Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]console.Fault(nil), c.faults...)
}

// last is the newest record of fault id.
func (c *recordingConsole) last(t *testing.T, id string) console.Fault {
	t.Helper()
	fs := c.recorded()
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].ID == id {
			return fs[i]
		}
	}
	require.Failf(t, "fault not recorded", "%s", id)
	return console.Fault{}
}

func (c *recordingConsole) ctl(t *testing.T) console.Controller {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotNil(t, c.controller, "the exporter attached no controller")
	return c.controller
}

// extHost is a host with extensions.
type extHost map[component.ID]component.Component

func (h extHost) GetExtensions() map[component.ID]component.Component { return h }

var testConsoleID = component.MustNewID("faultconsole")

// consoleHost is the host of a harness: with the console when cfg names
// one.
func consoleHost(cfg *Config, c *recordingConsole) component.Host {
	if cfg.Console == "" {
		return componenttest.NewNopHost()
	}
	return extHost{testConsoleID: c}
}

func withConsole(c *Config, _ *dependencies) { c.Console = testConsoleID.String() }

var operator = console.Operator{Name: "alice", Remote: "10.0.0.7:51234", Reason: "RMA done, GPU swapped"}

func TestConsoleConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Console = "faultconsole/ops"
	require.NoError(t, cfg.Validate())
	cfg.Console = "fault console"
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `console: "fault console" is not a component ID`)
}

func TestConsoleMissingFailsStart(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Console = "faultconsole/other"
	exp, err := newRemediationExporter(cfg, componenttest.NewNopTelemetrySettings(), dependencies{})
	require.NoError(t, err)
	err = exp.Start(context.Background(), extHost{testConsoleID: &recordingConsole{}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `remediationexporter: console: extension "faultconsole/other" is not configured`)
	require.NoError(t, exp.Shutdown(context.Background()))
}

func TestConsoleAttachedAtStartDetachedAtShutdown(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Console = testConsoleID.String()
	exp, err := newRemediationExporter(cfg, componenttest.NewNopTelemetrySettings(), dependencies{})
	require.NoError(t, err)
	rc := &recordingConsole{}
	require.NoError(t, exp.Start(context.Background(), extHost{testConsoleID: rc}))
	ctl := rc.ctl(t)
	require.NoError(t, exp.Shutdown(context.Background()))
	assert.Equal(t, 1, rc.detached)
	_, err = ctl.Quarantined(context.Background())
	assert.ErrorIs(t, err, errShuttingDown, "a call after shutdown is refused")
}

func TestConsoleGetsEveryDecidedRecord(t *testing.T) {
	h := newHarness(t, withConsole)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	dbe.Rank, dbe.RankKnown = 5, true
	traceID := steprecord.TraceID("llama-70b", 2, 18231)
	dbe.Evidence = []fault.Evidence{
		{Signal: "gpu.xid", Value: 48, Time: dbe.FirstSeen},
		{Signal: "straggler.verdict", Text: "straggler.compute", Time: dbe.LastSeen, TraceID: traceID, SpanID: pcommon.SpanID{1}},
		{Signal: "gpu.xid", Value: 63, Time: dbe.LastSeen},
	}
	require.NoError(t, h.consume(dbe))
	f := h.console.last(t, dbe.ID)
	assert.Equal(t, "gpu.memory.dbe", f.Type)
	assert.Equal(t, "P1", f.Severity)
	assert.Equal(t, console.StateOpen, f.State)
	assert.Equal(t, "xl003", f.Node)
	assert.Equal(t, "GPU-xl003-5", f.GPU)
	assert.Equal(t, "llama-70b", f.Job)
	assert.Equal(t, int64(5), f.Rank)
	assert.Equal(t, int64(-1), f.Step, "a fault record names no step")
	assert.Equal(t, dbe.FirstSeen, f.FirstSeen)
	assert.Equal(t, dbe.LastSeen, f.LastSeen)
	assert.Equal(t, dbe.Summary, f.Summary)
	assert.Equal(t, map[string]string{"gpu.xid": "63", "straggler.verdict": "straggler.compute"}, f.Evidence, "newest reading per signal")
	assert.Equal(t, traceID.String(), f.TraceID, "the contract trace of the cited step")
	assert.Equal(t, audit.DecisionActed, f.Decision)
	assert.Equal(t, "cordon,taint,condition,webhook", f.Action)
	assert.Contains(t, f.Reason, "cordoned")

	// A duplicate is shown as skipped, with why.
	require.NoError(t, h.consume(withState(dbe, fault.StateUpdate)))
	f = h.console.last(t, dbe.ID)
	assert.Equal(t, audit.DecisionSkipped, f.Decision)
	assert.Contains(t, f.Reason, "duplicate: fault already acted on")
	assert.Equal(t, traceID.String(), f.TraceID)

	// The resolution closes it.
	require.NoError(t, h.consume(withState(dbe, fault.StateResolved)))
	f = h.console.last(t, dbe.ID)
	assert.Equal(t, console.StateResolved, f.State)
	assert.Len(t, h.console.recorded(), 3, "one per record")

	// A failure shows as failed.
	h.platform.failNext = 10
	other := faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "xl009", fault.StateOpen)
	require.Error(t, h.consume(other))
	f = h.console.last(t, other.ID)
	assert.Equal(t, audit.DecisionFailed, f.Decision)
	assert.Contains(t, f.Reason, "connection refused")
	assert.Equal(t, int64(-1), f.Rank)
}

func TestConsoleShowsRecordsSkippedOnAFollower(t *testing.T) {
	leader := &flagLeader{}
	h := newHarness(t, withConsole, func(_ *Config, d *dependencies) { d.leader = leader })
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(r))
	f := h.console.last(t, r.ID)
	assert.Equal(t, audit.DecisionSkipped, f.Decision)
	assert.Equal(t, "not the leader", f.Reason)
	// It is acknowledged on the replica that acts, not on a follower.
	var notOwner *console.NotOwnerError
	require.ErrorAs(t, h.console.ctl(t).Acknowledge(context.Background(), r.ID, operator), &notOwner)
	assert.Empty(t, h.auditFor(stepAcknowledge, audit.DecisionActed))
	leader.set(true)
	require.NoError(t, h.console.ctl(t).Acknowledge(context.Background(), r.ID, operator))
	ack := h.auditFor(stepAcknowledge, audit.DecisionActed)
	require.Len(t, ack, 1)
	assert.Equal(t, r.ID, ack[0].FaultID)
	assert.Equal(t, "xl003", ack[0].Node)
}

func TestConsoleNotConfiguredRecordsNothing(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)))
	assert.Empty(t, h.console.recorded())
	assert.Nil(t, h.exp.console)
}

func TestConsoleListsQuarantinedNodes(t *testing.T) {
	h := newHarness(t, withConsole, func(c *Config, _ *dependencies) {
		c.Policy.HoldForHumanTypes = []string{string(fault.TypeGPUFellOffBus)}
	})
	ctl := h.console.ctl(t)
	nodes, err := ctl.Quarantined(context.Background())
	require.NoError(t, err)
	assert.Empty(t, nodes)

	nv := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl008", fault.StateOpen)
	bus := faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "xl002", fault.StateOpen)
	require.NoError(t, h.consume(nv))
	at := h.clock.Now()
	h.clock.Advance(time.Minute)
	require.NoError(t, h.consume(bus))
	h.clock.Advance(time.Minute)
	require.NoError(t, h.consume(withState(nv, fault.StateResolved)))

	nodes, err = ctl.Quarantined(context.Background())
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	assert.Equal(t, "xl002", nodes[0].Node)
	assert.Equal(t, []string{bus.ID}, nodes[0].FaultIDs)
	assert.Contains(t, nodes[0].Reason, "waits for a human")
	assert.False(t, nodes[0].ReleasePending)
	assert.Equal(t, "xl008", nodes[1].Node)
	assert.Equal(t, []string{nv.ID}, nodes[1].FaultIDs)
	assert.Equal(t, []string{"cordon", "taint", "condition"}, nodes[1].Actions)
	assert.Equal(t, at, nodes[1].Since)
	assert.True(t, nodes[1].ReleasePending, "resolved: in its verification window")
	assert.Contains(t, nodes[1].Reason, "verification window")
}

func TestConsoleReleaseGoesThroughTheRails(t *testing.T) {
	h := newHarness(t, withConsole)
	ctl := h.console.ctl(t)
	nv := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl008", fault.StateOpen)
	require.NoError(t, h.consume(nv))

	_, err := ctl.Release(context.Background(), "xl099", operator)
	require.EqualError(t, err, `node "xl099" is not quarantined by this exporter`)

	// Resolved: the window runs; the human's release ends it.
	require.NoError(t, h.consume(withState(nv, fault.StateResolved)))
	require.Equal(t, 1, h.clock.pending())
	detail, err := ctl.Release(context.Background(), "xl008", operator)
	require.NoError(t, err)
	assert.Equal(t, "applied: uncordoned", detail)
	_, rel := h.platform.counts()
	require.Equal(t, 1, rel)
	req := h.platform.releases[0]
	assert.Equal(t, "xl008", req.Node)
	assert.Equal(t, []string{nv.ID}, req.FaultIDs, "the node's fault ids: the platform's ownership rules apply")
	assert.Equal(t, []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}, req.Actions)
	assert.Contains(t, req.Reason, "alice")
	acted := h.auditFor(stepRelease, audit.DecisionActed)
	require.Len(t, acted, 1)
	assert.Equal(t, "alice", acted[0].Operator)
	assert.Equal(t, "10.0.0.7:51234", acted[0].OperatorRemote)
	assert.Equal(t, "RMA done, GPU swapped", acted[0].OperatorReason)
	assert.Equal(t, nv.ID, acted[0].FaultID)
	assert.Zero(t, h.clock.pending(), "the verification window is cancelled")
	h.clock.Advance(time.Hour)
	_, rel = h.platform.counts()
	assert.Equal(t, 1, rel, "the window's release does not come after")
	nodes, err := ctl.Quarantined(context.Background())
	require.NoError(t, err)
	assert.Empty(t, nodes)
	assert.Equal(t, int64(1), decisionCount(t, h, actionRelease, outcomeActed))

	_, err = ctl.Release(context.Background(), "xl008", operator)
	require.Error(t, err, "not held any more")
}

func TestConsoleReleaseOfAnOpenFaultStaysReleased(t *testing.T) {
	h := newHarness(t, withConsole)
	ctl := h.console.ctl(t)
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(r))
	_, err := ctl.Release(context.Background(), "xl003", operator)
	require.NoError(t, err)
	// An update of the same fault does not quarantine again: the human
	// decided.
	require.NoError(t, h.consume(withState(r, fault.StateUpdate)))
	q, rel := h.platform.counts()
	assert.Equal(t, 1, q)
	assert.Equal(t, 1, rel)
}

func TestConsoleReleaseRefusedOffTheLeaderAndDryRun(t *testing.T) {
	leader := &flagLeader{leader: true}
	h := newHarness(t, withConsole, func(_ *Config, d *dependencies) { d.leader = leader })
	ctl := h.console.ctl(t)
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)))
	leader.set(false)
	_, err := ctl.Release(context.Background(), "xl003", operator)
	var notOwner *console.NotOwnerError
	require.ErrorAs(t, err, &notOwner)
	_, rel := h.platform.counts()
	assert.Zero(t, rel)
	skipped := h.auditFor(stepRelease, audit.DecisionSkipped)
	require.Len(t, skipped, 1)
	assert.Equal(t, "alice", skipped[0].Operator)
	nodes, err := ctl.Quarantined(context.Background())
	require.NoError(t, err)
	assert.Len(t, nodes, 1, "still held")
	require.ErrorAs(t, ctl.ResetBreaker(context.Background(), operator), &notOwner)
	assert.Zero(t, h.platform.breaker.resets)

	dry := newHarness(t, withConsole, func(c *Config, _ *dependencies) { c.DryRun = true })
	dctl := dry.console.ctl(t)
	require.NoError(t, dry.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)))
	detail, err := dctl.Release(context.Background(), "xl003", operator)
	require.NoError(t, err)
	assert.Contains(t, detail, "would call Release on kubernetes: node=xl003")
	dry.platform.breaker.tripped = true
	require.NoError(t, dctl.ResetBreaker(context.Background(), operator))
	q, rel := dry.platform.counts()
	assert.Zero(t, q+rel, "a dry run calls nothing")
	assert.Zero(t, dry.platform.breaker.resets)
	assert.True(t, dry.platform.breaker.tripped)
	require.Len(t, dry.auditFor(stepRelease, audit.DecisionDryRun), 1)
	resets := dry.auditFor(stepBreaker, audit.DecisionDryRun)
	require.Len(t, resets, 1)
	assert.Equal(t, "alice", resets[0].Operator)
	assert.Equal(t, breakerEventReset, resets[0].Event)
}

func TestConsoleResetsTheBreaker(t *testing.T) {
	h := newHarness(t, withConsole)
	ctl := h.console.ctl(t)
	h.platform.breaker.budget = 1
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n1", fault.StateOpen),
		faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n2", fault.StateOpen)))
	q, _ := h.platform.counts()
	require.Equal(t, 1, q)
	require.Equal(t, 1, h.clock.pending(), "the tripped breaker is watched")

	b, err := ctl.Breaker(context.Background())
	require.NoError(t, err)
	assert.True(t, b.Tripped)
	assert.Equal(t, 1, b.Used)
	assert.Equal(t, 1, b.Budget)
	assert.Equal(t, time.Hour, b.Window)
	require.Len(t, b.History, 1)
	assert.Equal(t, breakerEventTripped, b.History[0].Event)
	assert.Contains(t, b.History[0].Reason, "admitting n2")
	trips := h.auditFor(stepBreaker, audit.DecisionActed)
	require.Len(t, trips, 1)
	assert.Equal(t, breakerEventTripped, trips[0].Event)

	require.NoError(t, ctl.ResetBreaker(context.Background(), operator))
	assert.Equal(t, 1, h.platform.breaker.resets)
	assert.Zero(t, h.clock.pending(), "the watch stops")
	reset := h.auditFor(stepBreaker, audit.DecisionActed)
	require.Len(t, reset, 2)
	assert.Equal(t, breakerEventReset, reset[1].Event)
	assert.Equal(t, "alice", reset[1].Operator)
	assert.Equal(t, "10.0.0.7:51234", reset[1].OperatorRemote)
	assert.Equal(t, "RMA done, GPU swapped", reset[1].OperatorReason)
	assert.Equal(t, int64(1), decisionCount(t, h, actionBreakerReset, outcomeActed))
	b, err = ctl.Breaker(context.Background())
	require.NoError(t, err)
	assert.False(t, b.Tripped)
	require.Len(t, b.History, 2)
	assert.Equal(t, console.BreakerEvent{Time: h.clock.Now(), Event: breakerEventReset, By: "alice", Reason: "RMA done, GPU swapped"}, b.History[1])

	// Quarantining resumes, and the next trip pages again.
	h.platform.breaker.budget = 1
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n3", fault.StateOpen)))
	q, _ = h.platform.counts()
	assert.Equal(t, 2, q)
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n4", fault.StateOpen)))
	pages := 0
	for _, p := range h.hook.got() {
		if p.Decision.Request == "breaker_tripped" {
			pages++
		}
	}
	assert.Equal(t, 2, pages)

	// A closed breaker is not reset.
	require.NoError(t, h.platform.breaker.Reset(context.Background()))
	err = ctl.ResetBreaker(context.Background(), operator)
	require.ErrorContains(t, err, "not tripped")
	assert.Equal(t, 2, h.platform.breaker.resets, "the test's own reset only")
}

func TestConsoleBreakerHistoryRestoredFromTheAudit(t *testing.T) {
	h := newHarness(t, withConsole)
	h.platform.breaker.budget = 1
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n1", fault.StateOpen),
		faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n2", fault.StateOpen)))
	require.NoError(t, h.console.ctl(t).ResetBreaker(context.Background(), operator))

	// A second life on the same audit file.
	cfg := *h.exp.cfg
	exp, err := newRemediationExporter(&cfg, componenttest.NewNopTelemetrySettings(), dependencies{platform: h.platform, clock: h.clock})
	require.NoError(t, err)
	rc := &recordingConsole{}
	require.NoError(t, exp.Start(context.Background(), extHost{testConsoleID: rc}))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	b, err := rc.ctl(t).Breaker(context.Background())
	require.NoError(t, err)
	require.Len(t, b.History, 2)
	assert.Equal(t, breakerEventTripped, b.History[0].Event)
	assert.Equal(t, breakerEventReset, b.History[1].Event)
	assert.Equal(t, "alice", b.History[1].By)
}

// A restart loses neither the faults the console showed nor their
// acknowledgements: a second life reads them from the audit file.
func TestConsoleFaultsRestoredFromTheAudit(t *testing.T) {
	h := newHarness(t, withConsole)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	bus := faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "xl009", fault.StateOpen)
	require.NoError(t, h.consume(dbe, bus))
	first := h.console.last(t, dbe.ID)
	require.Equal(t, audit.DecisionActed, first.Decision)
	require.NoError(t, h.consume(withState(dbe, fault.StateUpdate))) // skipped as a duplicate
	require.NoError(t, h.consume(withState(bus, fault.StateResolved)))
	require.NoError(t, h.console.ctl(t).Acknowledge(context.Background(), dbe.ID, operator))

	cfg := *h.exp.cfg
	exp, err := newRemediationExporter(&cfg, componenttest.NewNopTelemetrySettings(), dependencies{platform: h.platform, clock: h.clock})
	require.NoError(t, err)
	rc := &recordingConsole{}
	require.NoError(t, exp.Start(context.Background(), extHost{testConsoleID: rc}))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })

	require.Len(t, rc.recorded(), 2, "one per fault, before any record arrives")
	f := rc.last(t, dbe.ID)
	assert.Equal(t, "gpu.memory.dbe", f.Type)
	assert.Equal(t, "P1", f.Severity)
	assert.Equal(t, console.StateOpen, f.State)
	assert.Equal(t, "xl003", f.Node)
	assert.Equal(t, int64(-1), f.Rank)
	assert.Equal(t, restoredSummary, f.Summary)
	assert.Equal(t, first.Decision, f.Decision, "what was done, not the duplicate's skip")
	assert.Equal(t, first.Action, f.Action)
	assert.Equal(t, first.Reason, f.Reason)
	assert.False(t, f.FirstSeen.IsZero())
	require.NotNil(t, f.Ack)
	assert.Equal(t, console.Acknowledgement{By: "alice", Remote: operator.Remote, Reason: operator.Reason, Time: f.Ack.Time}, *f.Ack)
	assert.False(t, f.Ack.Time.IsZero())

	g := rc.last(t, bus.ID)
	assert.Equal(t, console.StateResolved, g.State)
	assert.Nil(t, g.Ack)

	// The restored fault can be acknowledged again in this life.
	require.NoError(t, rc.ctl(t).Acknowledge(context.Background(), dbe.ID, operator))
}

// A collector without a console keeps nothing of the audit for one.
func TestNoConsoleRestoresNoFaults(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)))
	cfg := *h.exp.cfg
	exp, err := newRemediationExporter(&cfg, componenttest.NewNopTelemetrySettings(), dependencies{platform: h.platform, clock: h.clock})
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	assert.Nil(t, exp.restored)
	assert.Empty(t, exp.recentFaults.byID)
}

func TestConsoleAcknowledge(t *testing.T) {
	h := newHarness(t, withConsole)
	ctl := h.console.ctl(t)
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(r))
	require.EqualError(t, ctl.Acknowledge(context.Background(), "0123456789abcdef", operator), `fault "0123456789abcdef" is unknown to this exporter`)
	require.NoError(t, ctl.Acknowledge(context.Background(), r.ID, operator))
	ack := h.auditFor(stepAcknowledge, audit.DecisionActed)
	require.Len(t, ack, 1)
	assert.Equal(t, r.ID, ack[0].FaultID)
	assert.Equal(t, "gpu.memory.dbe", ack[0].FaultType)
	assert.Equal(t, "alice", ack[0].Operator)
	assert.Equal(t, "RMA done, GPU swapped", ack[0].OperatorReason)
	assert.True(t, strings.HasPrefix(ack[0].Reason, "acknowledged by alice"))
}

// decisionCount reads remediation_decisions for action and outcome.
func decisionCount(t *testing.T, h *harness, action, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.metrics.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "otelcol_remediation_decisions" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				a, _ := dp.Attributes.Value(attribute.Key(metadata.TelemetryAttrAction))
				o, _ := dp.Attributes.Value(attribute.Key(metadata.TelemetryAttrOutcome))
				if a.AsString() == action && o.AsString() == outcome {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// The console shows what was done in a line: a webhook's payload stays in
// the audit file, and a long reason is clipped.
func TestSummariseKeepsReasonsShort(t *testing.T) {
	long := strings.Repeat("é", 400)
	decision, action, reason := summarise([]audit.Entry{
		{Step: stepQuarantine, Decision: audit.DecisionDryRun, Actions: []string{"taint", "condition"}, Reason: long},
		{Step: stepWebhook, Decision: audit.DecisionDryRun, Reason: `would post {"fault":{"fault.id":"f1"}}`},
	})
	assert.Equal(t, audit.DecisionDryRun, decision)
	assert.Equal(t, "taint,condition,webhook", action)
	assert.NotContains(t, reason, "fault.id", "the webhook's payload is not shown")
	assert.Contains(t, reason, "webhook dry_run")
	assert.LessOrEqual(t, len(reason), maxConsoleReason+len("…; webhook dry_run"))
	assert.True(t, utf8.ValidString(reason), "clipped on a rune boundary")
}
