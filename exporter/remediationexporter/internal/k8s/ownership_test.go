package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// managedFields is the entry the API server writes for an update by
// manager; the envtest tests cover the real server's.
func managedFields(manager, subresource, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Subresource: subresource, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

func TestCordonOurs(t *testing.T) {
	cordon := `{"f:metadata":{"f:annotations":{"f:otelcol-gpu.io/cordoned-by":{}}},"f:spec":{"f:unschedulable":{}}}`
	node := func(unschedulable bool, annotated bool, entries ...metav1.ManagedFieldsEntry) *corev1.Node {
		n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
		n.ManagedFields = entries
		if annotated {
			n.Annotations = map[string]string{AnnotationCordonedBy: Owner}
		}
		return n
	}
	assert.True(t, cordonOurs(node(true, true, managedFields(FieldManager, "", cordon))))
	// A human uncordoned and cordoned again: kubectl owns the field now.
	human := node(true, true, managedFields(FieldManager, "", `{"f:metadata":{"f:annotations":{"f:otelcol-gpu.io/cordoned-by":{}}}}`),
		managedFields("kubectl-cordon", "", `{"f:spec":{"f:unschedulable":{}}}`))
	assert.False(t, cordonOurs(human))
	assert.True(t, forgetCordon(human))
	assert.NotContains(t, human.Annotations, AnnotationCordonedBy)
	assert.True(t, human.Spec.Unschedulable, "forgetting touches only our mark")
	// Uncordoned by a human: forgotten.
	assert.True(t, forgetCordon(node(false, true, managedFields(FieldManager, "", cordon))))
	// A node with no managedFields: the owner cannot be proven, fail closed.
	assert.False(t, cordonOurs(node(true, true)), "no tracking: not provably ours")
	// No annotation, a status entry, unreadable fields: not ours.
	assert.False(t, cordonOurs(node(true, false, managedFields(FieldManager, "", cordon))))
	assert.False(t, cordonOurs(node(true, true, managedFields(FieldManager, "status", cordon))))
	assert.False(t, cordonOurs(node(true, true, managedFields(FieldManager, "", `not json`))))
	assert.False(t, cordonOurs(node(true, true, managedFields("kubelet", "", `{"f:metadata":{}}`))), "tracked, but not by us")
	assert.False(t, forgetCordon(node(true, true, managedFields(FieldManager, "", cordon))), "ours: kept")
}

func TestConditionOurs(t *testing.T) {
	ours := managedFields(FieldManager, "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"GPUHealthy\"}":{".":{},"f:status":{},"f:reason":{}}}}}`)
	theirs := managedFields("node-problem-detector", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"GPUHealthy\"}":{"f:status":{}}}}}`)
	node := func(status corev1.ConditionStatus, entries ...metav1.ManagedFieldsEntry) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: "GPUHealthy", Status: status}}}}
	}
	assert.True(t, conditionOurs(node(corev1.ConditionFalse, ours), "GPUHealthy"))
	assert.False(t, conditionOurs(node(corev1.ConditionTrue, ours), "GPUHealthy"), "already True")
	assert.False(t, conditionOurs(node(corev1.ConditionFalse, theirs), "GPUHealthy"), "set since by someone else")
	assert.False(t, conditionOurs(node(corev1.ConditionFalse, ours), "Other"))
	// The server moved f:reason from us to the writer that re-worded it.
	oursBut := managedFields(FieldManager, "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"GPUHealthy\"}":{"f:status":{}}}}}`)
	reworded := managedFields("gpu-diag", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"GPUHealthy\"}":{"f:reason":{}}}}}`)
	assert.False(t, conditionOurs(node(corev1.ConditionFalse, oursBut, reworded), "GPUHealthy"), "re-worded by someone else")
	assert.False(t, conditionOurs(node(corev1.ConditionFalse), "GPUHealthy"), "no tracking: not provably ours")
}

func TestRemoveOurTaint(t *testing.T) {
	ours := corev1.Taint{Key: DefaultTaintKey, Value: "gpu.ecc.dbe", Effect: corev1.TaintEffectNoSchedule}
	sameKey := corev1.Taint{Key: DefaultTaintKey, Value: "manual", Effect: corev1.TaintEffectNoExecute}
	other := corev1.Taint{Key: "example.com/keep", Effect: corev1.TaintEffectNoSchedule}
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{other, ours, sameKey}}}
	node.Annotations = map[string]string{AnnotationTaint: ours.ToString()}
	kept, removed := removeOurTaint(node)
	assert.True(t, removed)
	assert.Equal(t, []corev1.Taint{other, sameKey}, kept)

	// A human removed ours: nothing else goes.
	node.Spec.Taints = []corev1.Taint{other, sameKey}
	_, removed = removeOurTaint(node)
	assert.False(t, removed)
	// No record (the taint was there before us): nothing goes.
	node.Spec.Taints, node.Annotations = []corev1.Taint{ours}, nil
	_, removed = removeOurTaint(node)
	assert.False(t, removed)
}
