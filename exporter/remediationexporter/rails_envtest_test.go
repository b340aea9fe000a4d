//go:build envtest

package remediationexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The rails before the breaker and beside it, against a real API server:
// ghost nodes, nodes without a GPU, and the quarantined-share cap.

// breakerState reads the pool's breaker ConfigMap ("" when none yet).
func (cp *controlPlane) breakerState(t *testing.T, pool string) string {
	t.Helper()
	cm, err := cp.client.CoreV1().ConfigMaps(k8s.DefaultNamespace).Get(context.Background(), "breaker-"+pool, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return cm.Data["state"]
}

// quarantinedIn lists the pool's nodes carrying our quarantine label.
func (cp *controlPlane) quarantinedIn(t *testing.T, pool string) []string {
	t.Helper()
	list, err := cp.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{
		LabelSelector: poolLabel + "=" + pool + "," + k8s.LabelQuarantined + "=true"})
	require.NoError(t, err)
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names
}

// Forged faults naming nodes that do not exist spend none of the breaker's
// budget: a real DBE afterwards is acted on.
func testGhostNodes(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "ghost", 0.1) // 10 GPU nodes: a budget of one
	exp := startLeader(t, cfg)
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("gh%03d", i))
	}
	cp.createGPUNodes(t, "ghost", names...)

	var forged []fault.Record
	for i := range 25 {
		forged = append(forged, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, fmt.Sprintf("ghost-node-%02d", i), fault.StateOpen))
	}
	consumeRecords(t, exp, forged...)
	assert.Empty(t, cp.breakerState(t, "ghost"), "no admission, no breaker state written")
	skipped := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, ""))
	require.Len(t, skipped, 25)
	for _, e := range skipped {
		assert.Equal(t, "skip_not_found", e.Outcome)
		assert.Equal(t, "skip_not_found: node "+e.Node+" not found", e.Reason)
	}

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gh003", fault.StateOpen)
	consumeRecords(t, exp, dbe)
	assert.True(t, quarantined(cp.node(t, "gh003")), "the real DBE is acted on")
	assert.Len(t, auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, "gh003")), 1)
	st := cp.breakerState(t, "ghost")
	assert.Contains(t, st, `"tripped":false`)
	assert.Contains(t, st, `"gh003"`)
	assert.NotContains(t, st, "ghost-node")
	assert.Empty(t, hook.deliveriesWith("breaker_tripped"))
}

// A node without a GPU (a control-plane node) is never quarantined.
func testNoGPUNode(t *testing.T, cp *controlPlane) {
	hook, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "nogpu", 1)
	exp := startLeader(t, cfg)
	ctx := context.Background()
	cp.createGPUNodes(t, "nogpu", "nogpu-cp1")
	n := cp.node(t, "nogpu-cp1")
	n.Status.Capacity, n.Status.Allocatable = nil, nil
	_, err := cp.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	n = cp.node(t, "nogpu-cp1")
	n.Labels["node-role.kubernetes.io/control-plane"] = ""
	before, err := cp.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	consumeRecords(t, exp, faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "nogpu-cp1", fault.StateOpen))

	after := cp.node(t, "nogpu-cp1")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "nothing written")
	assert.False(t, after.Spec.Unschedulable)
	assert.Empty(t, after.Spec.Taints)
	assert.Empty(t, cp.breakerState(t, "nogpu"), "no breaker slot taken")
	skipped := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, "nogpu-cp1"))
	require.Len(t, skipped, 1)
	assert.Equal(t, "skip_no_gpu", skipped[0].Outcome)
	assert.Contains(t, skipped[0].Reason, "has no GPU")
	d := hook.deliveries()
	require.Len(t, d, 1, "the page says what was not done")
	assert.Equal(t, "skipped", d[0].payload.Decision.Outcome)
}

// 20 GPU nodes, max_quarantined_fraction 0.1: faults on every one of them,
// two per breaker window over ten windows (the breaker alone would admit
// all 20), quarantine two; a second exporter (a restart, a failover) reads
// the same two from the nodes.
func testShareCap(t *testing.T, cp *controlPlane) {
	const pool, window = "cap", 150 * time.Millisecond
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, pool, 0.1)
	cfg.MaxQuarantinedFraction = 0.1
	cfg.QuarantineCapTripsBreaker = false // the trip: quarantinecap_envtest_test.go
	cfg.Kubernetes.Breaker.Window = window
	exp := startLeader(t, cfg)
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("cap%03d", i))
	}
	cp.createGPUNodes(t, pool, names...)

	for round := range 10 {
		var recs []fault.Record
		for _, name := range names[round*2 : round*2+2] {
			recs = append(recs, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, name, fault.StateOpen))
		}
		consumeRecords(t, exp, recs...)
		time.Sleep(window + 50*time.Millisecond) // the next round is a new breaker window
	}
	assert.ElementsMatch(t, []string{"cap000", "cap001"}, cp.quarantinedIn(t, pool))
	capped := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepQuarantine && e.Decision == audit.DecisionSkipped && strings.HasPrefix(e.Reason, "quarantine cap")
	})
	require.Len(t, capped, 18)
	assert.Equal(t, "quarantine cap: 2 of 20 GPU nodes already quarantined by this exporter (max_quarantined_fraction 0.1 allows 2)", capped[0].Reason)
	assert.Contains(t, cp.breakerState(t, pool), `"tripped":false`, "the cap refuses before the breaker")

	// Another replica, with its own audit file and lease, counts the marks.
	cfg2 := cp.kubeConfig(t, url, pool, 1)
	cfg2.MaxQuarantinedFraction = 0.1
	cfg2.QuarantineCapTripsBreaker = false
	cfg2.Kubernetes.Lease.Name = "leader-cap-2"
	exp2 := startLeader(t, cfg2)
	consumeRecords(t, exp2, faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "cap019", fault.StateOpen))
	assert.Len(t, cp.quarantinedIn(t, pool), 2)
	assert.Len(t, auditEntries(t, cfg2.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepQuarantine && strings.HasPrefix(e.Reason, "quarantine cap: 2 of 20")
	}), 1)
	// A node already ours takes a second fault: it adds nothing to the share.
	consumeRecords(t, exp2, faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "cap000", fault.StateOpen))
	assert.Len(t, auditEntries(t, cfg2.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, "cap000")), 1)
}
