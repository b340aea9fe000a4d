package k8s

import (
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
)

// Ownership marks. A node carries them only while this exporter holds it
// quarantined; Release undoes nothing on a node without them.
const (
	// LabelQuarantined=true marks a node this exporter quarantined.
	LabelQuarantined = "otelcol-gpu.io/quarantined"
	// AnnotationFaultID lists the fault ids holding the quarantine,
	// comma-separated: the node is released when the last one resolves.
	AnnotationFaultID = "otelcol-gpu.io/fault-id"
	// AnnotationCordonedBy=otelcol-gpu is set only when this exporter set
	// spec.unschedulable, so it uncordons only what it cordoned (and only
	// while field management says the cordon is still ours: ownership.go).
	AnnotationCordonedBy = "otelcol-gpu.io/cordoned-by"
	// AnnotationTaint is the taint this exporter added, as key=value:effect:
	// Release removes that taint and no other.
	AnnotationTaint = "otelcol-gpu.io/taint"
	// FieldManager names this exporter's writes in the nodes' managedFields,
	// which tell a cordon or condition of ours from a later one by someone
	// else. It is the client's user agent, so cordons written before it
	// was set explicitly are recognised too.
	FieldManager = "otelcol-gpu-remediation"
	// Owner is this exporter's name in AnnotationCordonedBy.
	Owner = "otelcol-gpu"
	// ReasonRecovered is the condition reason written on release.
	ReasonRecovered = "Recovered"
)

// Marks on the repair objects this exporter creates (repair.go): NVSentinel
// RebootNode and GPUReset objects are cluster-scoped and anyone may create
// them, so ours say so, and say for which node, fault and attempt.
const (
	// LabelRepairBy=otelcol-gpu marks a repair object as this exporter's.
	LabelRepairBy = "otelcol-gpu.io/repair-by"
	// LabelRepairAction is the repair (reboot, gpu_reset).
	LabelRepairAction = "otelcol-gpu.io/repair-action"
	// LabelRepairNode is the node, as a label value (for listing; the spec
	// has the exact name).
	LabelRepairNode = "otelcol-gpu.io/node"
	// AnnotationRepairAttempt is the attempt of the node's repair loop (1
	// for the first): with the fault id (AnnotationFaultID) and the action,
	// what the object's name is derived from.
	AnnotationRepairAttempt = "otelcol-gpu.io/repair-attempt"
	// AnnotationRepairReason is the human text of the request.
	AnnotationRepairReason = "otelcol-gpu.io/repair-reason"
)

// mergeTaint returns taints with ours appended unless a taint with the same
// key and effect is already there (the API server rejects duplicates, and
// the one there may be another writer's). Other taints are kept as they are.
func mergeTaint(taints []corev1.Taint, ours corev1.Taint) ([]corev1.Taint, bool) {
	for _, t := range taints {
		if t.Key == ours.Key && t.Effect == ours.Effect {
			return taints, false
		}
	}
	return append(slices.Clone(taints), ours), true
}

// conditionReason turns a fault type into a CamelCase condition reason:
// gpu.xid.79 → GpuXid79, nvlink.degraded → NvlinkDegraded. A reason must
// start with a letter, so one that would not gets a Fault prefix.
func conditionReason(faultType string) string {
	var b strings.Builder
	upper := true
	for _, r := range faultType {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	reason := b.String()
	if reason == "" || !unicode.IsLetter(rune(reason[0])) {
		reason = "Fault" + reason
	}
	return reason
}

// labelValue makes s a valid label (and taint) value: at most 63
// characters of [A-Za-z0-9._-], starting and ending alphanumeric.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	isAlnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for len(b) > 0 && !isAlnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !isAlnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return string(b)
}

// faultIDs parses AnnotationFaultID.
func faultIDs(annotation string) []string {
	var ids []string
	for id := range strings.SplitSeq(annotation, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// setCondition sets cond on status (matched by type), keeping
// LastTransitionTime when the status does not change. It reports whether
// anything but the heartbeat changed.
func setCondition(status *corev1.NodeStatus, cond corev1.NodeCondition) bool {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return false
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
		*c = cond
		return true
	}
	status.Conditions = append(status.Conditions, cond)
	return true
}

// gpuRequested reports whether the pod asks for an NVIDIA GPU in any
// container (requests or limits: extended resources may set only limits).
func gpuRequested(pod *corev1.Pod) bool {
	uses := func(cs []corev1.Container) bool {
		for _, c := range cs {
			if q, ok := c.Resources.Limits[resourceGPU]; ok && !q.IsZero() {
				return true
			}
			if q, ok := c.Resources.Requests[resourceGPU]; ok && !q.IsZero() {
				return true
			}
		}
		return false
	}
	return uses(pod.Spec.Containers) || uses(pod.Spec.InitContainers)
}

const resourceGPU corev1.ResourceName = "nvidia.com/gpu"
