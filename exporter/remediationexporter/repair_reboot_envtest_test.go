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

var rebootNodesGVR = schema.GroupVersionResource{Group: "janitor.dgxc.nvidia.com", Version: "v1alpha1", Resource: "rebootnodes"}

// waitRepairObject waits for the one object of gvr the loop created for
// node and returns it.
func waitRepairObject(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, node string) unstructured.Unstructured {
	t.Helper()
	var obj unstructured.Unstructured
	require.Eventually(t, func() bool {
		list, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{LabelSelector: k8s.LabelRepairNode + "=" + node})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		obj = list.Items[0]
		return true
	}, 30*time.Second, 20*time.Millisecond, "no %s object for %s", gvr.Resource, node)
	return obj
}

// playJanitor sets obj's status as NVSentinel's janitor does when done.
func playJanitor(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj unstructured.Unstructured, conds ...map[string]any) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	list := make([]any, len(conds))
	for i, c := range conds {
		c["lastTransitionTime"] = now
		list[i] = c
	}
	obj.Object["status"] = map[string]any{"completionTime": now, "conditions": list}
	_, err := dyn.Resource(gvr).UpdateStatus(context.Background(), &obj, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// The escalation on Kubernetes: verification fails after the GPUReset →
// the loop creates a RebootNode (the fields NVSentinel's CRD requires,
// validated by the API server) → the janitor reboots the node → the
// verification passes → the node is uncordoned, only after that record.
func TestEnvtestRepairLoopEscalatesToRebootNode(t *testing.T) {
	cp := startControlPlane(t)
	_, url := newSignedHook(t)
	cfg := cp.kubeConfig(t, url, "esc", 1)
	cfg.Kubernetes.Repair = k8s.RepairNVSentinel
	cfg.Repair.Enabled = true
	cfg.Repair.PollInterval = 100 * time.Millisecond
	cfg.Repair.Agent.PrivateKeyFile = "unused: the agent is the test's"
	const uuid = "GPU-2b3c4d5e-0000-1111-2222-333344445555"
	agent := newFakeAgent(uuid)
	agent.verifyFails = map[int]bool{1: true}
	withAgentClient(t, agent)
	exp := startLeader(t, cfg)
	cp.createGPUNodes(t, "esc", "esc-1")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "esc-1", fault.StateOpen)
	dbe.GPUUUID, dbe.Entity.Key = uuid, uuid
	dbe.ID = dbe.ComputeID(fault.DefaultBucket)
	consumeRecords(t, exp, dbe)
	require.True(t, quarantined(cp.node(t, "esc-1")))

	dyn, err := dynamic.NewForConfig(rest.CopyConfig(cp.cfg))
	require.NoError(t, err)
	reset := waitRepairObject(t, dyn, gpuResetsGVR, "esc-1")
	playJanitor(t, dyn, gpuResetsGVR, reset, map[string]any{"type": "Complete", "status": "True", "reason": "GPUResetSucceeded", "message": "reset"})

	reboot := waitRepairObject(t, dyn, rebootNodesGVR, "esc-1")
	assert.Equal(t, "RebootNode", reboot.GetKind())
	spec, _, _ := unstructured.NestedMap(reboot.Object, "spec")
	assert.Equal(t, map[string]any{"nodeName": "esc-1", "force": false}, spec, "the CRD's required fields")
	assert.Equal(t, string(repair.ActionReboot), reboot.GetLabels()[k8s.LabelRepairAction])
	assert.Equal(t, dbe.ID, reboot.GetAnnotations()[k8s.AnnotationFaultID])
	assert.Equal(t, "2", reboot.GetAnnotations()[k8s.AnnotationRepairAttempt])
	agent.mu.Lock()
	require.Len(t, agent.verifies, 1, "the first verification failed before the reboot")
	agent.mu.Unlock()
	time.Sleep(5 * cfg.Repair.PollInterval)
	assert.True(t, quarantined(cp.node(t, "esc-1")), "cordoned while the reboot is pending")

	playJanitor(t, dyn, rebootNodesGVR, reboot,
		map[string]any{"type": "SignalSent", "status": "True", "reason": "Succeeded", "message": "reboot signal sent"},
		map[string]any{"type": "NodeReady", "status": "True", "reason": "Succeeded", "message": "node is Ready"})
	cp.waitNode(t, "esc-1", "released after the second verification", func(n *corev1.Node) bool { return released(n) })
	require.Eventually(t, func() bool {
		return len(auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "esc-1"))) == 1
	}, 30*time.Second, 20*time.Millisecond)

	assert.Equal(t, []repair.Step{repair.StepOnset, repair.StepRecorded, repair.StepQuarantined, repair.StepDrained,
		repair.StepRepairing, repair.StepRepaired, repair.StepVerifying, repair.StepDrained, repair.StepRepairing,
		repair.StepRepaired, repair.StepVerifying, repair.StepVerified, repair.StepReleased}, repairSteps(t, cfg.AuditFile))
	verified := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool { return e.LifecycleStep == string(repair.StepVerified) })
	require.Len(t, verified, 1)
	for _, r := range verified[0].Verification {
		assert.True(t, r.Passed)
	}
	rel := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "esc-1"))
	assert.False(t, rel[0].Time.Before(verified[0].Time), "uncordoned only after the passing verification record")
	rebooted := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.LifecycleStep == string(repair.StepRepaired) && e.RepairAction == string(repair.ActionReboot)
	})
	require.Len(t, rebooted, 1)
	assert.Contains(t, rebooted[0].Reason, "RebootNode", "the janitor's status said the reboot is done")
	agent.mu.Lock()
	defer agent.mu.Unlock()
	assert.Len(t, agent.verifies, 2)
	assert.Empty(t, agent.resets, "the janitor resets the GPU, not the agent")
}
