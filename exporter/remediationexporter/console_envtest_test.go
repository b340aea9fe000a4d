//go:build envtest

package remediationexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// startConsoleLeader starts the exporter from the factory with a recording
// fault console and waits until it holds its Lease.
func startConsoleLeader(t *testing.T, cfg *Config) (*remediationExporter, *recordingConsole) {
	t.Helper()
	cfg.Console = testConsoleID.String()
	rc := &recordingConsole{}
	exp := startFromFactoryOn(t, cfg, extHost{testConsoleID: rc})
	require.Eventually(t, exp.leader.IsLeader, 30*time.Second, 10*time.Millisecond, "exporter never took the lease")
	return exp, rc
}

// The fault console's controls against a real API server: a fault
// quarantines a node, the controller lists it and releases it (uncordoned,
// audited with the operator); the ConfigMap breaker trips, the controller
// reads and resets it, and the exporter quarantines again; a dry run calls
// nothing.
func TestEnvtestConsoleControls(t *testing.T) {
	cp := startControlPlane(t)
	t.Run("ReleaseAndResetTheBreaker", func(t *testing.T) { testConsoleReleaseAndReset(t, cp) })
	t.Run("DryRunCallsNothing", func(t *testing.T) { testConsoleDryRun(t, cp) })
}

func testConsoleReleaseAndReset(t *testing.T, cp *controlPlane) {
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "console", 0.1) // 10 GPU nodes: a budget of one
	exp, rc := startConsoleLeader(t, cfg)
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("con%03d", i))
	}
	cp.createGPUNodes(t, "console", names...)
	ctl := rc.ctl(t)
	ctx := context.Background()

	first := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "con000", fault.StateOpen)
	consumeRecords(t, exp, first)
	require.True(t, quarantined(cp.node(t, "con000")))
	shown := rc.last(t, first.ID)
	assert.Equal(t, audit.DecisionActed, shown.Decision)
	assert.Equal(t, "cordon,taint,condition,webhook", shown.Action)

	nodes, err := ctl.Quarantined(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, "con000", nodes[0].Node)
	assert.Equal(t, []string{first.ID}, nodes[0].FaultIDs)
	assert.False(t, nodes[0].Since.IsZero())

	// The budget is spent: the next fault trips the breaker.
	second := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "con001", fault.StateOpen)
	consumeRecords(t, exp, second)
	assert.False(t, cp.node(t, "con001").Spec.Unschedulable)
	assert.Contains(t, cp.breakerState(t, "console"), `"tripped":true`)
	b, err := ctl.Breaker(ctx)
	require.NoError(t, err)
	assert.True(t, b.Tripped)
	assert.Equal(t, 1, b.Used)
	assert.Equal(t, 1, b.Budget)
	assert.Equal(t, time.Hour, b.Window)
	require.NotEmpty(t, b.History)
	assert.Equal(t, breakerEventTripped, b.History[len(b.History)-1].Event)

	// Release through the console: uncordoned on the API server, audited
	// with the operator before the call returns.
	detail, err := ctl.Release(ctx, "con000", operator)
	require.NoError(t, err)
	assert.Contains(t, detail, "applied")
	n := cp.node(t, "con000")
	assert.True(t, released(n), "uncordoned, our taint gone")
	assert.Equal(t, corev1.ConditionTrue, gpuHealthy(n))
	rel := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "con000"))
	require.Len(t, rel, 1)
	assert.Equal(t, "alice", rel[0].Operator)
	assert.Equal(t, "RMA done, GPU swapped", rel[0].OperatorReason)
	assert.Equal(t, first.ID, rel[0].FaultID)
	nodes, err = ctl.Quarantined(ctx)
	require.NoError(t, err)
	assert.Empty(t, nodes)
	_, err = ctl.Release(ctx, "con002", operator)
	require.EqualError(t, err, `node "con002" is not quarantined by this exporter`)

	// Reset through the console: the ConfigMap reads closed, and the
	// exporter quarantines again.
	require.NoError(t, ctl.ResetBreaker(ctx, operator))
	assert.Contains(t, cp.breakerState(t, "console"), `"tripped":false`)
	reset := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepBreaker && e.Event == breakerEventReset && e.Decision == audit.DecisionActed
	})
	require.Len(t, reset, 1)
	assert.Equal(t, "alice", reset[0].Operator)
	b, err = ctl.Breaker(ctx)
	require.NoError(t, err)
	assert.False(t, b.Tripped)
	assert.Zero(t, b.Used)

	third := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "con002", fault.StateOpen)
	consumeRecords(t, exp, third)
	assert.True(t, quarantined(cp.node(t, "con002")), "quarantining resumed after the reset")

	require.NoError(t, ctl.Acknowledge(ctx, second.ID, operator))
	assert.Len(t, auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepAcknowledge && e.FaultID == second.ID && e.Operator == "alice"
	}), 1)
}

func testConsoleDryRun(t *testing.T, cp *controlPlane) {
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "consoledry", 0.1)
	cfg.DryRun = true
	exp, rc := startConsoleLeader(t, cfg)
	cp.createGPUNodes(t, "consoledry", "cdry000", "cdry001")
	ctl := rc.ctl(t)
	ctx := context.Background()

	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "cdry000", fault.StateOpen)
	consumeRecords(t, exp, r)
	assert.Equal(t, audit.DecisionDryRun, rc.last(t, r.ID).Decision)
	nodes, err := ctl.Quarantined(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 1, "the node it would hold")

	detail, err := ctl.Release(ctx, "cdry000", operator)
	require.NoError(t, err)
	assert.Contains(t, detail, "would call Release")
	require.NoError(t, ctl.ResetBreaker(ctx, operator))

	n := cp.node(t, "cdry000")
	assert.False(t, n.Spec.Unschedulable)
	assert.Empty(t, n.Spec.Taints)
	assert.Empty(t, cp.breakerState(t, "consoledry"), "the breaker ConfigMap is never written")
	assert.Len(t, auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionDryRun, "cdry000")), 1)
	assert.Len(t, auditEntries(t, cfg.AuditFile, stepDecision(stepBreaker, audit.DecisionDryRun, "")), 1)
}
