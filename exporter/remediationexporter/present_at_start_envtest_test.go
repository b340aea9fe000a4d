//go:build envtest

package remediationexporter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// A node that comes up with a volatile DBE already counted: the correlator
// opens a P1 gpu.memory.dbe fault marked present-at-start, and an acting
// exporter (dry_run false) applies the default policy's P1 action
// (p1_hardware: cordon, taint, condition) and pages, as for a DBE seen
// growing. The webhook body carries the mark; the audit entry does not
// (it has no field for it: auditentry.go).
func TestEnvtestPresentAtStartDBEGetsTheP1Action(t *testing.T) {
	cp := startControlPlane(t)
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "atstart", 1)
	require.False(t, cfg.DryRun)
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "atstart", "as001")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "as001", fault.StateOpen)
	dbe.PresentAtStart = true
	ld := logsOf(semconv.ScopeFaultRecords, dbe)
	mark, ok := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().Get(fault.AttrPresentAtStart)
	require.True(t, ok && mark.Bool(), "the record carries fault.present_at_start=true")
	require.NoError(t, exp.ConsumeLogs(context.Background(), ld))

	node := cp.node(t, "as001")
	assert.True(t, quarantined(node), "cordoned and tainted")
	require.Len(t, node.Spec.Taints, 1)
	assert.Equal(t, k8s.DefaultTaintKey, node.Spec.Taints[0].Key)
	assert.Equal(t, "gpu.memory.dbe", node.Spec.Taints[0].Value)
	assert.Equal(t, corev1.TaintEffectNoSchedule, node.Spec.Taints[0].Effect)
	assert.Equal(t, corev1.ConditionFalse, gpuHealthy(node))
	assert.Equal(t, dbe.ID, node.Annotations[k8s.AnnotationFaultID])

	acted := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, "as001"))
	require.Len(t, acted, 1)
	assert.Equal(t, dbe.ID, acted[0].FaultID)
	assert.Equal(t, "p1_hardware", acted[0].Rule)
	assert.Equal(t, []string{"cordon", "taint", "condition"}, acted[0].Actions)
	assert.Equal(t, "P1", acted[0].Severity)

	d := hook.deliveriesWith("notify")
	require.Len(t, d, 1, "one page")
	assert.Equal(t, "page", d[0].payload.Route)
	assert.Equal(t, "acted", d[0].payload.Decision.Outcome)
	assert.False(t, d[0].payload.Decision.DryRun)
	assert.Equal(t, []string{"cordon", "taint", "condition"}, d[0].payload.Decision.Actions)
	assert.True(t, d[0].payload.Fault.PresentAtStart, "the page says the fault was there at start")
}
