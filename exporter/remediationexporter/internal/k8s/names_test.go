package k8s

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

func TestMergeTaintDedupesByKeyAndEffect(t *testing.T) {
	foreign := corev1.Taint{Key: "example.com/other", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	ours := corev1.Taint{Key: DefaultTaintKey, Value: "gpu.ecc.dbe", Effect: corev1.TaintEffectNoSchedule}
	existing := []corev1.Taint{foreign}

	merged, added := mergeTaint(existing, ours)
	require.True(t, added)
	assert.Equal(t, []corev1.Taint{foreign, ours}, merged)
	assert.Len(t, existing, 1, "the input slice is not modified")

	// Same key and effect, other value: the one there stays, no duplicate.
	again, added := mergeTaint(merged, corev1.Taint{Key: ours.Key, Value: "gpu.xid.79", Effect: ours.Effect})
	assert.False(t, added)
	assert.Equal(t, merged, again)

	// Same key, other effect: a different taint.
	noExec := corev1.Taint{Key: ours.Key, Value: "gpu.ecc.dbe", Effect: corev1.TaintEffectNoExecute}
	withNoExec, added := mergeTaint(merged, noExec)
	assert.True(t, added)
	assert.Len(t, withNoExec, 3)
}

func TestRemoveTaintKeyKeepsOthers(t *testing.T) {
	taints := []corev1.Taint{
		{Key: "a", Effect: corev1.TaintEffectNoSchedule},
		{Key: DefaultTaintKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "b", Effect: corev1.TaintEffectNoExecute},
		{Key: DefaultTaintKey, Effect: corev1.TaintEffectNoExecute},
	}
	kept, removed := removeTaintKey(taints, DefaultTaintKey)
	assert.True(t, removed)
	assert.Equal(t, []corev1.Taint{taints[0], taints[2]}, kept)
	assert.Len(t, taints, 4, "the input slice is not modified")

	_, removed = removeTaintKey(kept, DefaultTaintKey)
	assert.False(t, removed)
}

func TestConditionReason(t *testing.T) {
	for in, want := range map[string]string{
		"gpu.ecc.dbe":          "GpuEccDbe",
		"gpu.xid.79":           "GpuXid79",
		"nvlink.degraded":      "NvlinkDegraded",
		"node.repeated_faults": "NodeRepeatedFaults",
		"":                     "Fault",
		"79":                   "Fault79",
		"ünïcode-x":            "NCodeX",
	} {
		assert.Equal(t, want, conditionReason(in), in)
	}
}

func TestLabelValueIsAlwaysValid(t *testing.T) {
	for _, in := range []string{"gpu.xid.79", "a b/c", "-x-", "", "é", string(make([]byte, 100))} {
		out := labelValue(in)
		assert.Empty(t, validation.IsValidLabelValue(out), "%q -> %q", in, out)
	}
	assert.Equal(t, "gpu.xid.79", labelValue("gpu.xid.79"))
}

func TestFaultIDs(t *testing.T) {
	assert.Equal(t, []string{"a", "b"}, faultIDs(" a,,b "))
	assert.Empty(t, faultIDs(""))
}

func TestSetConditionKeepsTransitionTime(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	status := corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
	}}
	cond := corev1.NodeCondition{Type: "GPUHealthy", Status: corev1.ConditionFalse, Reason: "GpuEccDbe", LastTransitionTime: t0}
	require.True(t, setCondition(&status, cond))
	require.Len(t, status.Conditions, 2)

	assert.False(t, setCondition(&status, cond), "same condition: no write")

	cond.Message, cond.LastTransitionTime = "other", t1
	require.True(t, setCondition(&status, cond))
	assert.Equal(t, t0, status.Conditions[1].LastTransitionTime, "status unchanged keeps its transition time")

	cond.Status = corev1.ConditionTrue
	require.True(t, setCondition(&status, cond))
	assert.Equal(t, t1, status.Conditions[1].LastTransitionTime)
	assert.Equal(t, corev1.ConditionTrue, status.Conditions[0].Status, "other conditions untouched")
}

func TestGPURequested(t *testing.T) {
	gpu := corev1.ResourceList{resourceGPU: resource.MustParse("1")}
	zero := corev1.ResourceList{resourceGPU: resource.MustParse("0")}
	pod := func(c corev1.Container) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	assert.True(t, gpuRequested(pod(corev1.Container{Resources: corev1.ResourceRequirements{Limits: gpu}})))
	assert.True(t, gpuRequested(pod(corev1.Container{Resources: corev1.ResourceRequirements{Requests: gpu}})))
	assert.False(t, gpuRequested(pod(corev1.Container{Resources: corev1.ResourceRequirements{Limits: zero}})))
	assert.False(t, gpuRequested(pod(corev1.Container{})))
	assert.True(t, gpuRequested(&corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: gpu}}}}}))
}

func TestBreakerBudget(t *testing.T) {
	assert.Equal(t, 5, breakerBudget(0.1, 50))
	assert.Equal(t, 29, breakerBudget(0.29, 100))
	assert.Equal(t, 1, breakerBudget(0.1, 3), "at least one node")
	assert.Equal(t, 1, breakerBudget(0.1, 0))
	assert.Equal(t, 100, breakerBudget(1, 100))
}

func TestParseBreakerState(t *testing.T) {
	st, err := parseBreakerState("")
	require.NoError(t, err)
	assert.NotNil(t, st.Window)
	assert.False(t, st.Tripped)

	st, err = parseBreakerState(`{"window":{"n1":"2025-03-14T09:00:00Z"},"tripped":true}`)
	require.NoError(t, err)
	assert.True(t, st.Tripped)
	assert.Len(t, st.Window, 1)

	_, err = parseBreakerState(`{"window":`)
	assert.Error(t, err, "a damaged state is an error, not a fresh budget")

	st.Window["old"] = time.Date(2025, 3, 14, 7, 0, 0, 0, time.UTC)
	assert.True(t, st.prune(time.Date(2025, 3, 14, 8, 0, 0, 0, time.UTC)))
	assert.Equal(t, []string{"n1"}, keys(st.Window))
}

func keys(m map[string]time.Time) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// planQuarantine is the pure part of Quarantine; the API behaviour is
// covered by the envtest tests.
func TestPlanQuarantine(t *testing.T) {
	gpu, err := newGPUNodes(NewDefaultConfig())
	require.NoError(t, err)
	p := &Platform{cfg: NewDefaultConfig(), gpu: gpu}
	req := actuator.Request{Node: "n1", FaultID: "f1", FaultType: "gpu.ecc.dbe"}
	all := wanted{cordon: true, taint: true}

	// A node without a GPU (a control-plane node) is left as it is.
	cp := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp1"}}
	res, _, changed := p.planQuarantine(cp, req, all)
	assert.Equal(t, actuator.SkipNoGPU, res.Outcome)
	assert.False(t, changed)
	assert.False(t, cp.Spec.Unschedulable)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Capacity: corev1.ResourceList{resourceGPU: resource.MustParse("8")}}}
	res, done, changed := p.planQuarantine(node, req, all)
	assert.Equal(t, actuator.Applied, res.Outcome)
	assert.True(t, changed)
	assert.Len(t, done, 2)
	assert.True(t, node.Spec.Unschedulable)
	assert.Equal(t, Owner, node.Annotations[AnnotationCordonedBy])
	assert.Equal(t, "true", node.Labels[LabelQuarantined])
	assert.Equal(t, "f1", node.Annotations[AnnotationFaultID])
	// The API server records that our update set spec.unschedulable.
	node.ManagedFields = []metav1.ManagedFieldsEntry{managedFields(FieldManager, "", `{"f:spec":{"f:unschedulable":{}}}`)}

	// The same fault again: nothing to do.
	res, _, changed = p.planQuarantine(node, req, all)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)
	assert.False(t, changed)

	// A second fault is recorded so the node is released only after both.
	req2 := req
	req2.FaultID = "f2"
	res, _, changed = p.planQuarantine(node, req2, all)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)
	assert.True(t, changed)
	assert.Equal(t, "f1,f2", node.Annotations[AnnotationFaultID])

	foreign := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}
	res, _, changed = p.planQuarantine(foreign, req, all)
	assert.Equal(t, actuator.SkipForeign, res.Outcome)
	assert.False(t, changed)
	assert.Empty(t, foreign.Labels)

	maint := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{DefaultMaintenanceLabel: ""}}}
	res, _, changed = p.planQuarantine(maint, req, all)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome)
	assert.False(t, changed)
	assert.False(t, maint.Spec.Unschedulable)
}

func TestWantedActions(t *testing.T) {
	assert.Equal(t, wanted{cordon: true}, wantedActions([]actuator.Action{actuator.ActionDrain}))
	assert.Equal(t, wanted{taint: true, condition: true, evict: true},
		wantedActions([]actuator.Action{actuator.ActionTaint, actuator.ActionCondition, actuator.ActionEvict, "unknown"}))
}

// removeTaintKey, for the tests, returns taints without those with key, of any effect.
func removeTaintKey(taints []corev1.Taint, key string) ([]corev1.Taint, bool) {
	kept := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == key })
	return kept, len(kept) != len(taints)
}
