package k8s

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

func statusOf(t *testing.T, status map[string]any) janitorStatus {
	t.Helper()
	return janitorStatusOf(&unstructured.Unstructured{Object: map[string]any{"status": status}})
}

func c(typ, status, reason string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": "m"}
}

func TestRepairProgress(t *testing.T) {
	const done = "2026-12-06T05:00:00Z"
	for _, tc := range []struct {
		name   string
		action repair.Action
		status map[string]any
		want   actuator.RepairState
	}{
		{"reboot: no status", repair.ActionReboot, nil, actuator.RepairPending},
		{"reboot: signal sent", repair.ActionReboot, map[string]any{"conditions": []any{c("SignalSent", "True", "Succeeded"), c("NodeReady", "Unknown", "Initializing")}}, actuator.RepairPending},
		{"reboot: manual mode", repair.ActionReboot, map[string]any{"conditions": []any{c("ManualMode", "True", "OutsideActorRequired")}}, actuator.RepairPending},
		{"reboot: ready", repair.ActionReboot, map[string]any{"completionTime": done, "conditions": []any{c("NodeReady", "True", "Succeeded")}}, actuator.RepairDone},
		{"reboot: ready without completion", repair.ActionReboot, map[string]any{"conditions": []any{c("NodeReady", "True", "Succeeded")}}, actuator.RepairPending},
		{"reboot: timeout", repair.ActionReboot, map[string]any{"completionTime": done, "conditions": []any{c("NodeReady", "False", "Timeout")}}, actuator.RepairFailed},
		{"reboot: signal failed", repair.ActionReboot, map[string]any{"completionTime": done, "conditions": []any{c("SignalSent", "False", "Failed")}}, actuator.RepairFailed},
		{"reset: pending", repair.ActionGPUReset, map[string]any{"conditions": []any{c("Ready", "False", "Pending")}}, actuator.RepairPending},
		{"reset: succeeded", repair.ActionGPUReset, map[string]any{"completionTime": done, "conditions": []any{c("Complete", "True", "GPUResetSucceeded")}}, actuator.RepairDone},
		{"reset: job failed", repair.ActionGPUReset, map[string]any{"completionTime": done, "conditions": []any{c("Complete", "True", "ResetJobFailed")}}, actuator.RepairFailed},
		{"reset: phase succeeded", repair.ActionGPUReset, map[string]any{"phase": "Succeeded"}, actuator.RepairDone},
		{"reset: phase failed", repair.ActionGPUReset, map[string]any{"phase": "Failed"}, actuator.RepairFailed},
		{"reset: completed, no Complete", repair.ActionGPUReset, map[string]any{"completionTime": done}, actuator.RepairFailed},
		{"reset: malformed conditions", repair.ActionGPUReset, map[string]any{"conditions": []any{"x", 3}}, actuator.RepairPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := repairProgress(tc.action, statusOf(t, tc.status))
			assert.Equal(t, tc.want, got.State, got.Detail)
		})
	}
}

func TestRepairObjectName(t *testing.T) {
	req := actuator.RepairRequest{Node: "a-very-long-node-name.with.a.domain.example.com", FaultID: "a07573c9c14f1fae", Attempt: 1, Action: repair.ActionGPUReset}
	k, _ := kindOf(req.Action)
	name := repairObjectName(k, req)
	assert.Empty(t, validation.IsDNS1123Label(name))
	assert.LessOrEqual(t, len(name), 38, "the janitor's reset Job name is derived from it")
	assert.Equal(t, name, repairObjectName(k, req), "deterministic")
	for _, other := range []func(r *actuator.RepairRequest){
		func(r *actuator.RepairRequest) { r.Attempt = 2 },
		func(r *actuator.RepairRequest) { r.FaultID = "b" },
		func(r *actuator.RepairRequest) { r.Node = "n2" },
	} {
		r := req
		other(&r)
		assert.NotEqual(t, name, repairObjectName(k, r))
	}
	rk, _ := kindOf(repair.ActionReboot)
	assert.Contains(t, repairObjectName(rk, req), "otelcol-gpu-reboot-")
	_, ok := kindOf(repair.ActionRMA)
	assert.False(t, ok)
}

func TestRepairValidation(t *testing.T) {
	p, err := New(fake.NewClientset(), NewDefaultConfig(), zap.NewNop())
	require.NoError(t, err)
	assert.Empty(t, p.Repairs(), "repair: none")
	res, err := p.StartRepair(context.Background(), actuator.RepairRequest{Node: "n", FaultID: "f", Attempt: 1, Action: repair.ActionReboot})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome)
	prog, err := p.RepairStatus(context.Background(), actuator.RepairRequest{Node: "n", FaultID: "f", Attempt: 1, Action: repair.ActionReboot})
	require.NoError(t, err)
	assert.Equal(t, actuator.RepairUnknown, prog.State)

	for _, bad := range []actuator.RepairRequest{
		{FaultID: "f", Attempt: 1},
		{Node: "n", Attempt: 1},
		{Node: "n", FaultID: "f"},
	} {
		assert.Error(t, validRepair(bad), "%+v", bad)
	}
}

func TestDrainedCountsWorkloadOnly(t *testing.T) {
	yes := true
	client := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "a", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "x", Controller: &yes}}}, Spec: corev1.PodSpec{NodeName: "n1"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "a", OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "x", Controller: &yes}}}, Spec: corev1.PodSpec{NodeName: "n2"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ds-not-controller", Namespace: "a", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "x"}}}, Spec: corev1.PodSpec{NodeName: "n3"}},
	)
	p, err := New(client, NewDefaultConfig(), zap.NewNop())
	require.NoError(t, err)
	ctx := context.Background()
	for node, want := range map[string]bool{"n1": true, "n2": false, "n3": false, "empty": true} {
		got, detail, err := p.Drained(ctx, node)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s: %s", node, detail)
	}
	got, detail, err := p.Drained(ctx, "")
	require.NoError(t, err)
	assert.False(t, got, detail)
}
