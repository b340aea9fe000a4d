//go:build envtest

package k8s

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

const testGPUUUID = "GPU-1b2c3d4e-0000-1111-2222-333344445555"

func repairRequest(node, faultID string, action repair.Action, attempt int) actuator.RepairRequest {
	return actuator.RepairRequest{Node: node, GPUUUID: testGPUUUID, FaultID: faultID, Attempt: attempt, FaultType: "gpu.ecc.dbe",
		Action: action, Reason: "gpu.ecc.dbe " + faultID, Requested: time.Now()}
}

// janitorStatus writes status on an object as NVSentinel's janitor does
// (the status subresource; the API server validates it against the CRD).
func setJanitorStatus(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	obj, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	obj.Object["status"] = status
	_, err = dyn.Resource(gvr).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
	require.NoError(t, err)
}

func cond(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func repairObjects(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, node string) []unstructured.Unstructured {
	t.Helper()
	list, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{LabelSelector: LabelRepairNode + "=" + node})
	require.NoError(t, err)
	return list.Items
}

func testRepairNVSentinel(t *testing.T, cfg *rest.Config) {
	ctx := context.Background()
	client := newClient(t, cfg)
	dyn, err := dynamic.NewForConfig(rest.CopyConfig(cfg))
	require.NoError(t, err)
	p, err := New(client, func() Config { c := NewDefaultConfig(); c.Repair = RepairNVSentinel; return c }(), zaptest.NewLogger(t), WithDynamicClient(dyn))
	require.NoError(t, err)
	assert.Equal(t, []repair.Action{repair.ActionGPUReset, repair.ActionReboot}, p.Repairs())

	for _, n := range []string{"repair-1", "repair-2", "repair-3"} {
		createGPUNode(t, client, n, nil)
	}
	for _, q := range []actuator.Request{dbeRequest("repair-1", "f-r1"), dbeRequest("repair-3", "f-r3")} {
		res, err := p.Quarantine(ctx, q)
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	}
	start := func(req actuator.RepairRequest, want actuator.Outcome) actuator.Result {
		t.Helper()
		res, err := p.StartRepair(ctx, req)
		require.NoError(t, err)
		require.Equal(t, want, res.Outcome, res.Detail)
		return res
	}
	status := func(req actuator.RepairRequest) actuator.RepairProgress {
		t.Helper()
		prog, err := p.RepairStatus(ctx, req)
		require.NoError(t, err)
		return prog
	}

	t.Run("RebootNode", func(t *testing.T) {
		r1 := repairRequest("repair-1", "f-r1", repair.ActionReboot, 1)
		start(r1, actuator.Applied)
		objs := repairObjects(t, dyn, rebootNodeGVR, "repair-1")
		require.Len(t, objs, 1)
		obj := objs[0]
		assert.Equal(t, "RebootNode", obj.GetKind())
		assert.Equal(t, repairObjectName(repairKind{prefix: "otelcol-gpu-reboot-"}, r1), obj.GetName())
		spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
		assert.Equal(t, map[string]any{"nodeName": "repair-1", "force": false}, spec)
		assert.Equal(t, Owner, obj.GetLabels()[LabelRepairBy])
		assert.Equal(t, "reboot", obj.GetLabels()[LabelRepairAction])
		assert.Equal(t, "f-r1", obj.GetAnnotations()[AnnotationFaultID])
		assert.Equal(t, "1", obj.GetAnnotations()[AnnotationRepairAttempt])

		// A retry, a restart, a second replica: the same object.
		start(r1, actuator.AlreadyDone)
		assert.Len(t, repairObjects(t, dyn, rebootNodeGVR, "repair-1"), 1)
		assert.Equal(t, actuator.RepairPending, status(r1).State)

		// The janitor sent the signal; the node is not back yet.
		setJanitorStatus(t, dyn, rebootNodeGVR, obj.GetName(), map[string]any{
			"startTime": time.Now().UTC().Format(time.RFC3339),
			"conditions": []any{cond("SignalSent", "True", "Succeeded", "req-123"),
				cond("NodeReady", "Unknown", "Initializing", "Node ready state not yet determined")},
		})
		prog := status(r1)
		assert.Equal(t, actuator.RepairPending, prog.State, prog.Detail)
		assert.Contains(t, prog.Detail, "SignalSent=True")
		// Back and Ready.
		setJanitorStatus(t, dyn, rebootNodeGVR, obj.GetName(), map[string]any{
			"startTime": time.Now().UTC().Format(time.RFC3339), "completionTime": time.Now().UTC().Format(time.RFC3339),
			"conditions": []any{cond("SignalSent", "True", "Succeeded", "req-123"),
				cond("NodeReady", "True", "Succeeded", "Node reached ready state post-reboot")},
		})
		prog = status(r1)
		assert.Equal(t, actuator.RepairDone, prog.State, prog.Detail)
		// The janitor does not uncordon: the node stays ours until released.
		assert.True(t, getNode(t, client, "repair-1").Spec.Unschedulable)

		// A second reboot of the loop is a new object; it times out.
		r2 := repairRequest("repair-1", "f-r1", repair.ActionReboot, 2)
		start(r2, actuator.Applied)
		assert.Len(t, repairObjects(t, dyn, rebootNodeGVR, "repair-1"), 2)
		setJanitorStatus(t, dyn, rebootNodeGVR, repairObjectName(repairKind{prefix: "otelcol-gpu-reboot-"}, r2), map[string]any{
			"completionTime": time.Now().UTC().Format(time.RFC3339),
			"conditions": []any{cond("SignalSent", "True", "Succeeded", "req-124"),
				cond("NodeReady", "False", "Timeout", "Node failed to return to ready state after timeout duration")},
		})
		prog = status(r2)
		assert.Equal(t, actuator.RepairFailed, prog.State, prog.Detail)
		assert.Contains(t, prog.Detail, "Timeout")
		assert.Equal(t, actuator.RepairDone, status(r1).State, "the first stays done")
	})

	t.Run("GPUReset", func(t *testing.T) {
		r := repairRequest("repair-1", "f-r1", repair.ActionGPUReset, 1)
		start(r, actuator.Applied)
		start(r, actuator.AlreadyDone)
		objs := repairObjects(t, dyn, gpuResetGVR, "repair-1")
		require.Len(t, objs, 1)
		obj := objs[0]
		assert.Equal(t, "GPUReset", obj.GetKind())
		assert.LessOrEqual(t, len(obj.GetName()), 38, "the janitor derives its Job's name from it")
		uuids, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "selector", "uuids")
		assert.Equal(t, []string{testGPUUUID}, uuids, "only the faulty GPU")
		node, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName")
		assert.Equal(t, "repair-1", node)
		assert.Equal(t, actuator.RepairPending, status(r).State)

		// The reset Job failed: Complete=True with the failure's reason.
		setJanitorStatus(t, dyn, gpuResetGVR, obj.GetName(), map[string]any{
			"completionTime": time.Now().UTC().Format(time.RFC3339),
			"conditions": []any{cond("Ready", "True", "ReadyForReset", "ready"),
				cond("Complete", "True", "ResetJobFailed", "nvidia-smi -r: GPU in use")},
		})
		prog := status(r)
		assert.Equal(t, actuator.RepairFailed, prog.State, prog.Detail)

		r2 := repairRequest("repair-1", "f-r1", repair.ActionGPUReset, 2)
		start(r2, actuator.Applied)
		setJanitorStatus(t, dyn, gpuResetGVR, repairObjectName(repairKind{prefix: "otelcol-gpu-reset-"}, r2), map[string]any{
			"completionTime": time.Now().UTC().Format(time.RFC3339),
			"conditions":     []any{cond("Complete", "True", "GPUResetSucceeded", "reset")},
		})
		prog = status(r2)
		assert.Equal(t, actuator.RepairDone, prog.State, prog.Detail)

		// Without a valid GPU UUID no GPUReset is made: an empty selector
		// would reset every GPU of the node.
		for _, uuid := range []string{"", "MIG-1b2c3d4e-0000-1111-2222-333344445555", "GPU-5"} {
			bad := repairRequest("repair-3", "f-r3", repair.ActionGPUReset, 1)
			bad.GPUUUID = uuid
			start(bad, actuator.SkipExcluded)
		}
		assert.Empty(t, repairObjects(t, dyn, gpuResetGVR, "repair-3"))
	})

	t.Run("SchemaValidates", func(t *testing.T) {
		// The API server enforces the real CRD: an object without the
		// required force, or a malformed UUID, is rejected.
		bad := repairObject(repairKind{rebootNodeGVR, "RebootNode", "x-"}, repairRequest("repair-1", "f-x", repair.ActionReboot, 1))
		unstructured.RemoveNestedField(bad.Object, "spec", "nodeName")
		_, err := dyn.Resource(rebootNodeGVR).Create(ctx, bad, metav1.CreateOptions{})
		assert.True(t, apierrors.IsInvalid(err), "missing nodeName: %v", err)
		badReset := repairObject(repairKind{gpuResetGVR, "GPUReset", "x-"}, repairRequest("repair-1", "f-x", repair.ActionGPUReset, 1))
		require.NoError(t, unstructured.SetNestedStringSlice(badReset.Object, []string{"GPU-5"}, "spec", "selector", "uuids"))
		_, err = dyn.Resource(gpuResetGVR).Create(ctx, badReset, metav1.CreateOptions{})
		assert.True(t, apierrors.IsInvalid(err), "malformed uuid: %v", err)
	})

	t.Run("NotOurs", func(t *testing.T) {
		// Not quarantined at all.
		start(repairRequest("repair-2", "f-r2", repair.ActionReboot, 1), actuator.NotOurs)
		// Quarantined by us, for another fault.
		start(repairRequest("repair-3", "f-other", repair.ActionReboot, 1), actuator.NotOurs)
		// Missing node.
		start(repairRequest("repair-ghost", "f-r2", repair.ActionReboot, 1), actuator.SkipNotFound)
		assert.Empty(t, repairObjects(t, dyn, rebootNodeGVR, "repair-2"))
		assert.Empty(t, repairObjects(t, dyn, rebootNodeGVR, "repair-3"))

		// Someone else's object under our name: left alone, not taken for
		// ours, its status not read as our repair's.
		r := repairRequest("repair-3", "f-r3", repair.ActionReboot, 1)
		name := repairObjectName(repairKind{prefix: "otelcol-gpu-reboot-"}, r)
		foreign := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "janitor.dgxc.nvidia.com/v1alpha1", "kind": "RebootNode",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"nodeName": "repair-3", "force": true},
		}}
		_, err := dyn.Resource(rebootNodeGVR).Create(ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)
		start(r, actuator.NotOurs)
		got, err := dyn.Resource(rebootNodeGVR).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		force, _, _ := unstructured.NestedBool(got.Object, "spec", "force")
		assert.True(t, force, "untouched")
		assert.Empty(t, got.GetLabels())
		assert.Equal(t, actuator.RepairFailed, status(r).State)
		// Deleted (by a human, a TTL): the repair is not going on.
		require.NoError(t, dyn.Resource(rebootNodeGVR).Delete(ctx, name, metav1.DeleteOptions{}))
		prog := status(r)
		assert.Equal(t, actuator.RepairFailed, prog.State)
		assert.Contains(t, prog.Detail, "gone")
	})

	t.Run("RepairNone", func(t *testing.T) {
		none, err := New(client, NewDefaultConfig(), zaptest.NewLogger(t))
		require.NoError(t, err)
		assert.Empty(t, none.Repairs())
		res, err := none.StartRepair(ctx, repairRequest("repair-1", "f-r1", repair.ActionReboot, 3))
		require.NoError(t, err)
		assert.Equal(t, actuator.SkipExcluded, res.Outcome)
		assert.Len(t, repairObjects(t, dyn, rebootNodeGVR, "repair-1"), 2, "nothing created")
	})
}

func testRepairDrained(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)
	createGPUNode(t, client, "drain-1", nil)
	createNamespace(t, client, "drain")
	pod := func(name string, mutate func(*corev1.Pod)) {
		t.Helper()
		po := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "drain"},
			Spec: corev1.PodSpec{NodeName: "drain-1", Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if mutate != nil {
			mutate(po)
		}
		created, err := client.CoreV1().Pods("drain").Create(ctx, po, metav1.CreateOptions{})
		require.NoError(t, err)
		if po.Status.Phase != "" {
			created.Status.Phase = po.Status.Phase
			_, err = client.CoreV1().Pods("drain").UpdateStatus(ctx, created, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	pod("dcgm-exporter-x", func(po *corev1.Pod) {
		po.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "dcgm-exporter", UID: "u1", Controller: ptr.To(true)}}
	})
	pod("kube-proxy-drain-1", func(po *corev1.Pod) {
		po.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "abc"}
	})
	pod("finished", func(po *corev1.Pod) { po.Status.Phase = corev1.PodSucceeded })
	drained, detail, err := p.Drained(ctx, "drain-1")
	require.NoError(t, err)
	assert.True(t, drained, detail)

	// A workload, even one tolerating our taint, keeps the node draining.
	pod("trainer", func(po *corev1.Pod) {
		po.Spec.Tolerations = []corev1.Toleration{{Key: DefaultTaintKey, Operator: corev1.TolerationOpExists}}
	})
	drained, detail, err = p.Drained(ctx, "drain-1")
	require.NoError(t, err)
	assert.False(t, drained)
	assert.Contains(t, detail, "drain/trainer")
	assert.NotContains(t, detail, "dcgm-exporter")

	require.NoError(t, client.CoreV1().Pods("drain").Delete(ctx, "trainer", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	drained, detail, err = p.Drained(ctx, "drain-1")
	require.NoError(t, err)
	assert.True(t, drained, detail)
}
