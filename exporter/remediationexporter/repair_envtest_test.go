//go:build envtest

package remediationexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

var gpuResetsGVR = schema.GroupVersionResource{Group: "janitor.dgxc.nvidia.com", Version: "v1alpha1", Resource: "gpuresets"}

// The repair loop against the envtest kube-apiserver with NVSentinel's
// janitor CRDs: a DBE cordons the node, the loop creates a GPUReset object
// (validated against the CRD's schema) for the faulty GPU, the janitor's
// status says done, the agent verifies, and the node is uncordoned only
// after the verification record.
func TestEnvtestRepairLoopReleasesAfterVerification(t *testing.T) {
	cp := startControlPlane(t)
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "loop", 1)
	cfg.Kubernetes.Repair = k8s.RepairNVSentinel
	cfg.Repair.Enabled = true
	cfg.Repair.PollInterval = 100 * time.Millisecond
	cfg.Repair.Agent.PrivateKeyFile = "unused: the agent is the test's"
	const uuid = "GPU-1b2c3d4e-0000-1111-2222-333344445555"
	agent := newFakeAgent(uuid)
	agent.holdVerify = true
	withAgentClient(t, agent)
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "loop", "loop-1")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "loop-1", fault.StateOpen)
	dbe.GPUUUID, dbe.Entity.Key = uuid, uuid
	dbe.ID = dbe.ComputeID(fault.DefaultBucket)
	consumeRecords(t, exp, dbe)
	require.True(t, quarantined(cp.node(t, "loop-1")))

	dyn, err := dynamic.NewForConfig(rest.CopyConfig(cp.cfg))
	require.NoError(t, err)
	var obj unstructured.Unstructured
	require.Eventually(t, func() bool {
		list, err := dyn.Resource(gpuResetsGVR).List(context.Background(), metav1.ListOptions{LabelSelector: k8s.LabelRepairNode + "=loop-1"})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		obj = list.Items[0]
		return true
	}, 30*time.Second, 20*time.Millisecond, "no GPUReset object")
	node, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName")
	uuids, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "selector", "uuids")
	assert.Equal(t, "loop-1", node)
	assert.Equal(t, []string{uuid}, uuids, "the faulty GPU only")
	assert.Empty(t, agent.resets, "the janitor resets it, not the agent")

	// The janitor's Job succeeded.
	obj.Object["status"] = map[string]any{"completionTime": time.Now().UTC().Format(time.RFC3339),
		"conditions": []any{map[string]any{"type": "Complete", "status": "True", "reason": "GPUResetSucceeded", "message": "reset",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	_, err = dyn.Resource(gpuResetsGVR).UpdateStatus(context.Background(), &obj, metav1.UpdateOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool { agent.mu.Lock(); defer agent.mu.Unlock(); return len(agent.verifies) == 1 },
		30*time.Second, 20*time.Millisecond, "the verification never started")
	time.Sleep(5 * cfg.Repair.PollInterval)
	assert.True(t, quarantined(cp.node(t, "loop-1")), "not released while the verification runs")

	agent.mu.Lock()
	agent.holdVerify = false
	agent.mu.Unlock()
	cp.waitNode(t, "loop-1", "released after the verification", func(n *corev1.Node) bool { return released(n) })
	require.Eventually(t, func() bool {
		return len(auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "loop-1"))) == 1
	}, 30*time.Second, 20*time.Millisecond)
	verified := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool { return e.LifecycleStep == string(repair.StepVerified) })
	require.Len(t, verified, 1)
	rel := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "loop-1"))
	assert.False(t, rel[0].Time.Before(verified[0].Time), "released after the verification record")
	assert.Len(t, verified[0].Verification, 1)
}
