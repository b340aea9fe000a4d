//go:build envtest

package remediationexporter

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// TestRBACRepair applies deploy/rbac and then deploy/rbac/repair, with
// NVSentinel's CRDs installed, and carries out the repair loop's platform
// calls as the gateway's service account: nothing before the repair
// binding, everything it needs after, and no update or delete of the
// janitor's objects.
func TestRBACRepair(t *testing.T) {
	cp := startControlPlane(t)
	ctx := context.Background()
	_, err := envtest.InstallCRDs(rest.CopyConfig(cp.cfg), envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("internal", "k8s", "testdata", "nvsentinel")}, ErrorIfPathMissing: true,
	})
	require.NoError(t, err)
	applyKustomization(t, cp.client, rbacDir)
	cp.createGPUNodes(t, "rbacrepair", "rbacr001")
	sa := asGateway(t, cp.cfg)
	require.Eventually(t, func() bool {
		_, err := sa.CoreV1().Nodes().Get(ctx, "rbacr001", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the service account never got nodes/get")

	saCfg := rest.CopyConfig(cp.cfg)
	saCfg.Impersonate = rest.ImpersonationConfig{
		UserName: gatewayUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + k8s.DefaultNamespace, "system:authenticated"},
	}
	dyn, err := dynamic.NewForConfig(saCfg)
	require.NoError(t, err)
	cfg := k8s.NewDefaultConfig()
	cfg.GPUNodeSelector = poolLabel + "=rbacrepair"
	cfg.Repair = k8s.RepairNVSentinel
	p, err := k8s.New(sa, cfg, zaptest.NewLogger(t), k8s.WithDynamicClient(dyn))
	require.NoError(t, err)

	res, err := p.Quarantine(ctx, actuator.Request{Node: "rbacr001", FaultID: "f-rr-1", FaultType: "gpu.memory.dbe",
		Severity: "P1", Reason: "gpu.memory.dbe f-rr-1",
		Actions: []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}})
	require.NoError(t, err)
	require.Equal(t, actuator.Applied, res.Outcome, res.Detail)

	reboot := actuator.RepairRequest{Node: "rbacr001", FaultID: "f-rr-1", FaultType: "gpu.memory.dbe", Attempt: 1,
		Action: repair.ActionReboot, Reason: "gpu.memory.dbe f-rr-1", Requested: time.Now()}
	reset := reboot
	reset.Action, reset.GPUUUID = repair.ActionGPUReset, "GPU-1b2c3d4e-0000-1111-2222-333344445555"

	// Without deploy/rbac/repair: no repair object, no pod list.
	_, err = p.StartRepair(ctx, reboot)
	assert.True(t, apierrors.IsForbidden(err), "create RebootNode without the repair binding: %v", err)
	_, _, err = p.Drained(ctx, "rbacr001")
	assert.True(t, apierrors.IsForbidden(err), "list pods without the repair binding: %v", err)

	applyKustomization(t, cp.client, filepath.Join(rbacDir, "repair"))
	rebootNodes := schema.GroupVersionResource{Group: "janitor.dgxc.nvidia.com", Version: "v1alpha1", Resource: "rebootnodes"}
	require.Eventually(t, func() bool {
		_, err := dyn.Resource(rebootNodes).List(ctx, metav1.ListOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the service account never got rebootnodes/list")

	for _, req := range []actuator.RepairRequest{reboot, reset} {
		res, err := p.StartRepair(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		res, err = p.StartRepair(ctx, req) // get, on AlreadyExists
		require.NoError(t, err)
		assert.Equal(t, actuator.AlreadyDone, res.Outcome, res.Detail)
		prog, err := p.RepairStatus(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, actuator.RepairPending, prog.State, prog.Detail)
	}
	drained, detail, err := p.Drained(ctx, "rbacr001")
	require.NoError(t, err)
	assert.True(t, drained, detail)

	// The janitor owns the objects: no update, no delete, no status.
	list, err := dyn.Resource(rebootNodes).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	obj := list.Items[0]
	err = dyn.Resource(rebootNodes).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "delete RebootNode: %v", err)
	_, err = dyn.Resource(rebootNodes).Update(ctx, &obj, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "update RebootNode: %v", err)
	_, err = dyn.Resource(rebootNodes).UpdateStatus(ctx, &obj, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "update RebootNode status: %v", err)
	// Pods: listed, never deleted.
	err = sa.CoreV1().Pods(k8s.DefaultNamespace).Delete(ctx, "any", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "delete pod: %v", err)
	_, err = sa.CoreV1().Pods(k8s.DefaultNamespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rogue"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "create pod: %v", err)
}
