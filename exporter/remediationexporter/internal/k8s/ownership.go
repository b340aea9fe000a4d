package k8s

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// What Release may undo: only what is still what this exporter wrote. A
// mark alone (the cordoned-by annotation) is not enough, because a human
// can undo our action and redo it for their own reasons while the mark
// stays. Per action:
//
//   - cordon (spec.unschedulable): ours while the node is unschedulable,
//     carries AnnotationCordonedBy and the API server's field management
//     says FieldManager last set spec.unschedulable. A human's uncordon
//     drops the field and its owner, a later cordon of theirs is owned by
//     their manager (kubectl-cordon, kubectl-edit...): that cordon stays.
//   - taint: ours while the exact taint we added (key, value, effect,
//     recorded in AnnotationTaint) is on the node. The taints list is
//     atomic for field management (whoever adds any taint owns the whole
//     list), so the record, not the owner, says which one is ours. A taint
//     a human removed is not put back, and other taints, ours key or not,
//     are never touched.
//   - condition: ours while it is False and FieldManager last set its
//     status and reason (conditions are a map keyed by type, so each has
//     its owners). One another writer set or re-worded since stays theirs.
//   - DRA device taint: a DeviceTaintRule we created (our name prefix,
//     label, node annotation and taint key), deleted by UID.
//   - label and annotations: ours by name (otelcol-gpu.io/...), removed.
//
// A node without any managedFields, or with managedFields but no entry of
// ours for the field (someone reset them, or the server folded ours into
// "ancient-changes"), is not ours: the owner cannot be proven, so fail
// closed: the node stays cordoned and a human decides. Every real node has
// the kubelet's entries from registration; envtest's kube-apiserver tracks
// Update managers only after a node's first apply, which the tests make as
// a kubelet would.

// managedByUs reports whether FieldManager owns the field at path (in
// managedFields' FieldsV1 form, e.g. "f:spec", "f:unschedulable") of node,
// for subresource ("" for the main resource, "status").
// A node without managedFields answers false: see above.
func managedByUs(node *corev1.Node, subresource string, path ...string) bool {
	for _, mf := range node.ManagedFields {
		if mf.Manager != FieldManager || mf.Subresource != subresource || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		found := true
		for _, p := range path {
			next, ok := fields[p].(map[string]any)
			if !ok {
				found = false
				break
			}
			fields = next
		}
		if found {
			return true
		}
	}
	return false
}

// cordonOurs: the node's cordon is the one this exporter made.
func cordonOurs(node *corev1.Node) bool {
	return node.Spec.Unschedulable && node.Annotations[AnnotationCordonedBy] == Owner &&
		managedByUs(node, "", "f:spec", "f:unschedulable")
}

// forgetCordon drops AnnotationCordonedBy when the cordon is no longer
// ours (a human uncordoned, and maybe cordoned again): from then on we
// never lift it. It reports whether it dropped the mark.
func forgetCordon(node *corev1.Node) bool {
	if node.Annotations[AnnotationCordonedBy] != Owner || cordonOurs(node) {
		return false
	}
	delete(node.Annotations, AnnotationCordonedBy)
	return true
}

// conditionOurs: the node's condition typ is False and its status and
// reason were last set by this exporter.
func conditionOurs(node *corev1.Node, typ string) bool {
	key, err := json.Marshal(map[string]string{"type": typ})
	if err != nil {
		return false
	}
	entry := []string{"f:status", "f:conditions", "k:" + string(key)}
	return conditionFalse(node, typ) &&
		managedByUs(node, "status", append(entry, "f:status")...) && managedByUs(node, "status", append(entry, "f:reason")...)
}

// removeOurTaint returns taints without the one recorded in
// AnnotationTaint; every other taint stays, one with our key too.
func removeOurTaint(node *corev1.Node) ([]corev1.Taint, bool) {
	recorded := node.Annotations[AnnotationTaint]
	if recorded == "" {
		return node.Spec.Taints, false
	}
	var kept []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.ToString() != recorded {
			kept = append(kept, t)
		}
	}
	return kept, len(kept) != len(node.Spec.Taints)
}
