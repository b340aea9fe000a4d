//go:build envtest

package remediationexporter

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// A human who uncordons a node we quarantined and cordons it again for
// their own reasons keeps their cordon when the fault resolves: the
// exporter's return to service removes only its own taint, condition and
// marks (internal/k8s/ownership.go).
func TestEnvtestReleaseLeavesHumanCordon(t *testing.T) {
	cp := startControlPlane(t)
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "human", 1)
	cfg.VerificationWindow = 100 * time.Millisecond
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "human", "human-recordon", "human-plain")
	ctx := context.Background()
	for _, name := range []string{"human-recordon", "human-plain"} {
		// A kubelet's registration leaves managedFields on a real node;
		// this API server tracks a node's managers from its first apply.
		_, err := cp.client.CoreV1().Nodes().Patch(ctx, name, types.ApplyPatchType,
			[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+name+`","annotations":{"volumes.kubernetes.io/controller-managed-attach-detach":"true"}}}`),
			metav1.PatchOptions{FieldManager: "kubelet"})
		require.NoError(t, err)
	}
	kubectl := func(name, patch, manager string) {
		t.Helper()
		_, err := cp.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: manager})
		require.NoError(t, err)
	}

	recordon := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "human-recordon", fault.StateOpen)
	plain := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "human-plain", fault.StateOpen)
	consumeRecords(t, exp, recordon, plain)
	require.True(t, quarantined(cp.node(t, "human-recordon")))
	require.True(t, quarantined(cp.node(t, "human-plain")))

	// kubectl uncordon, then kubectl cordon: the cordon is the human's now.
	kubectl("human-recordon", `{"spec":{"unschedulable":null}}`, "kubectl-uncordon")
	kubectl("human-recordon", `{"spec":{"unschedulable":true}}`, "kubectl-cordon")

	consumeRecords(t, exp, withState(recordon, fault.StateResolved), withState(plain, fault.StateResolved))
	for _, name := range []string{"human-recordon", "human-plain"} {
		require.Eventually(t, func() bool {
			return len(auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, name))) == 1
		}, 30*time.Second, 10*time.Millisecond, name+" release audited")
	}

	n := cp.node(t, "human-recordon")
	assert.True(t, n.Spec.Unschedulable, "the human's cordon stays")
	assert.False(t, slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == k8s.DefaultTaintKey }), "our taint goes")
	assert.Empty(t, n.Labels[k8s.LabelQuarantined])
	assert.Empty(t, n.Annotations[k8s.AnnotationCordonedBy])
	assert.Equal(t, corev1.ConditionTrue, gpuHealthy(n))
	acted := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "human-recordon"))
	assert.Contains(t, acted[0].Reason, "cordon kept")

	plainNode := cp.node(t, "human-plain")
	assert.True(t, released(plainNode), "no human action: released")
	assert.Equal(t, corev1.ConditionTrue, gpuHealthy(plainNode))
}
