package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// With kubernetes.repair: nvsentinel, the platform carries out reboots and
// GPU resets through NVIDIA NVSentinel's janitor: it creates a RebootNode
// or GPUReset object (janitor.dgxc.nvidia.com/v1alpha1, cluster-scoped;
// the CRDs as NVSentinel ships them are in testdata/nvsentinel) and reads
// the janitor's status on it. The janitor reboots through the cloud
// provider's API or resets the GPU with a Job; it does not uncordon: the
// node stays quarantined by us until the verification passes and the
// exporter releases it.
//
// NVSentinel's Go module is not imported: the objects are unstructured,
// with the fields the CRDs require (RebootNode: spec.nodeName and
// spec.force=false; GPUReset: spec.nodeName and spec.selector.uuids with
// the one faulty GPU; a GPUReset without a selector would reset every GPU
// of the node, so a request without a valid GPU UUID is refused).
//
// Every object is named from node, fault, action and attempt (a hash: the
// janitor derives its reset Job's name from the GPUReset's, which must
// stay short), labelled and annotated as ours. Creating it again is
// AlreadyDone; an object of that name that is not ours is left alone.

// NVSentinel's janitor API.
var (
	rebootNodeGVR = schema.GroupVersionResource{Group: "janitor.dgxc.nvidia.com", Version: "v1alpha1", Resource: "rebootnodes"}
	gpuResetGVR   = schema.GroupVersionResource{Group: "janitor.dgxc.nvidia.com", Version: "v1alpha1", Resource: "gpuresets"}
)

// The conditions the janitor writes (janitor/api/v1alpha1).
const (
	condRebootSignalSent = "SignalSent" // the cloud provider was asked to reboot
	condRebootNodeReady  = "NodeReady"  // True: the node came back Ready
	condManualMode       = "ManualMode" // the janitor waits for an outside actor
	condResetComplete    = "Complete"   // True once finished, success or not: the reason says which
	reasonResetSucceeded = "GPUResetSucceeded"
)

// gpuUUIDPattern is the GPUReset CRD's pattern for spec.selector.uuids.
var gpuUUIDPattern = regexp.MustCompile(`^GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

var _ actuator.Repairer = (*Platform)(nil)

// Repairs implements actuator.Repairer: reboot and GPU reset with
// repair: nvsentinel, none otherwise.
func (p *Platform) Repairs() []repair.Action {
	if p.cfg.Repair != RepairNVSentinel || p.dyn == nil {
		return nil
	}
	return []repair.Action{repair.ActionGPUReset, repair.ActionReboot}
}

// repairKind is what a repair action becomes: its resource, kind and name
// prefix.
type repairKind struct {
	gvr    schema.GroupVersionResource
	kind   string
	prefix string
}

func kindOf(action repair.Action) (repairKind, bool) {
	switch action {
	case repair.ActionReboot:
		return repairKind{rebootNodeGVR, "RebootNode", "otelcol-gpu-reboot-"}, true
	case repair.ActionGPUReset:
		return repairKind{gpuResetGVR, "GPUReset", "otelcol-gpu-reset-"}, true
	}
	return repairKind{}, false
}

// repairObjectName is the object's name for req: the kind's prefix and 16
// hex digits of a hash of node, fault, action and attempt (30 characters
// at most, a valid DNS-1123 label).
func repairObjectName(k repairKind, req actuator.RepairRequest) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{req.Node, req.FaultID, string(req.Action), strconv.Itoa(req.Attempt)}, "\x00")))
	return k.prefix + hex.EncodeToString(sum[:8])
}

// validRepair checks what every repair request needs.
func validRepair(req actuator.RepairRequest) error {
	switch {
	case req.Node == "":
		return errors.New("kubernetes: repair request names no node")
	case strings.TrimSpace(req.FaultID) == "":
		return fmt.Errorf("kubernetes: repair request for node %s has no fault id", req.Node)
	case req.Attempt < 1:
		return fmt.Errorf("kubernetes: repair request for node %s, fault %s: attempt %d, want 1 or more", req.Node, req.FaultID, req.Attempt)
	}
	return nil
}

// repairObject builds the object req asks for.
func repairObject(k repairKind, req actuator.RepairRequest) *unstructured.Unstructured {
	spec := map[string]any{"nodeName": req.Node}
	switch req.Action {
	case repair.ActionReboot:
		spec["force"] = false
	case repair.ActionGPUReset:
		spec["selector"] = map[string]any{"uuids": []any{req.GPUUUID}}
	}
	reason := strings.TrimSpace(req.Reason)
	if reason == "" {
		reason = strings.TrimSpace(req.FaultType + " " + req.FaultID)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": k.gvr.GroupVersion().String(),
		"kind":       k.kind,
		"metadata": map[string]any{
			"name": repairObjectName(k, req),
			"labels": map[string]any{
				LabelRepairBy:     Owner,
				LabelRepairAction: labelValue(string(req.Action)),
				LabelRepairNode:   labelValue(req.Node),
			},
			"annotations": map[string]any{
				AnnotationFaultID:       req.FaultID,
				AnnotationRepairAttempt: strconv.Itoa(req.Attempt),
				AnnotationRepairReason:  reason,
			},
		},
		"spec": spec,
	}}
	return obj
}

// ownRepairObject reports whether obj is the object this exporter created
// for req: our label, the node, the fault and the attempt.
func ownRepairObject(obj *unstructured.Unstructured, req actuator.RepairRequest) bool {
	node, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName")
	ann := obj.GetAnnotations()
	return obj.GetLabels()[LabelRepairBy] == Owner && obj.GetLabels()[LabelRepairAction] == labelValue(string(req.Action)) &&
		node == req.Node && ann[AnnotationFaultID] == req.FaultID && ann[AnnotationRepairAttempt] == strconv.Itoa(req.Attempt)
}

// StartRepair implements actuator.Repairer: it creates the RebootNode or
// GPUReset object for req on a node this exporter holds quarantined for
// req.FaultID (our quarantine label, the fault id in our annotation);
// another node is NotOurs and nothing is created.
func (p *Platform) StartRepair(ctx context.Context, req actuator.RepairRequest) (actuator.Result, error) {
	k, known := kindOf(req.Action)
	if !known || !slices.Contains(p.Repairs(), req.Action) {
		return actuator.Result{Outcome: actuator.SkipExcluded, Detail: fmt.Sprintf("kubernetes.repair %s does not carry out %q", p.cfg.Repair, req.Action)}, nil
	}
	if err := validRepair(req); err != nil {
		return actuator.Result{}, err
	}
	if req.Action == repair.ActionGPUReset && !gpuUUIDPattern.MatchString(req.GPUUUID) {
		// Without a selector the janitor resets every GPU of the node.
		return actuator.Result{Outcome: actuator.SkipExcluded, Detail: fmt.Sprintf("gpu_reset on %s needs the GPU's UUID (GPU-xxxxxxxx-...), got %q: no GPUReset created", req.Node, req.GPUUUID)}, nil
	}
	node, err := p.client.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
	if err != nil {
		return p.apiResult(req.Node, "repair", err)
	}
	if node.Labels[LabelQuarantined] != "true" || !slices.Contains(faultIDs(node.Annotations[AnnotationFaultID]), req.FaultID) {
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("node %s is not quarantined by this exporter for fault %s: no %s created", req.Node, req.FaultID, k.kind)}, nil
	}
	obj := repairObject(k, req)
	res := p.dyn.Resource(k.gvr)
	// Strict: a field the installed CRD does not know is an error, not
	// silently pruned.
	_, err = res.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager, FieldValidation: metav1.FieldValidationStrict})
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return actuator.Result{}, fmt.Errorf("kubernetes: read %s %s: %w", k.kind, obj.GetName(), gerr)
		}
		if !ownRepairObject(existing, req) {
			return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s %s exists and is not this exporter's for node %s, fault %s, attempt %d: left alone",
				k.kind, obj.GetName(), req.Node, req.FaultID, req.Attempt)}, nil
		}
		return actuator.Result{Outcome: actuator.AlreadyDone, Detail: fmt.Sprintf("%s %s already created for node %s", k.kind, obj.GetName(), req.Node)}, nil
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			// The resource itself is missing: NVSentinel's CRDs are not
			// installed. Nothing would carry the repair out.
			return actuator.Result{}, fmt.Errorf("kubernetes: create %s for node %s: %w (is NVSentinel's janitor installed?)", k.kind, req.Node, err)
		}
		return actuator.Result{}, fmt.Errorf("kubernetes: create %s for node %s: %w", k.kind, req.Node, err)
	}
	p.logger.Info("created repair object", zap.String("kind", k.kind), zap.String("name", obj.GetName()), zap.String("node", req.Node), zap.String("fault.id", req.FaultID))
	return actuator.Result{Outcome: actuator.Applied, Detail: fmt.Sprintf("%s %s created for node %s", k.kind, obj.GetName(), req.Node)}, nil
}

// RepairStatus implements actuator.Repairer from the janitor's status on
// our object: RebootNode is done when completionTime is set and NodeReady
// is True, failed when completionTime is set otherwise; GPUReset is done
// when its Complete condition is True with reason GPUResetSucceeded (or
// phase Succeeded), failed when Complete is True with any other reason
// (or phase Failed). Anything else is pending; an object that is gone or
// not ours is failed.
func (p *Platform) RepairStatus(ctx context.Context, req actuator.RepairRequest) (actuator.RepairProgress, error) {
	k, known := kindOf(req.Action)
	if !known || !slices.Contains(p.Repairs(), req.Action) {
		return actuator.RepairProgress{State: actuator.RepairUnknown, Detail: fmt.Sprintf("kubernetes.repair %s does not carry out %q", p.cfg.Repair, req.Action)}, nil
	}
	if err := validRepair(req); err != nil {
		return actuator.RepairProgress{}, err
	}
	name := repairObjectName(k, req)
	obj, err := p.dyn.Resource(k.gvr).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return actuator.RepairProgress{State: actuator.RepairFailed, Detail: fmt.Sprintf("%s %s is gone", k.kind, name)}, nil
	}
	if err != nil {
		return actuator.RepairProgress{}, fmt.Errorf("kubernetes: read %s %s: %w", k.kind, name, err)
	}
	if !ownRepairObject(obj, req) {
		return actuator.RepairProgress{State: actuator.RepairFailed, Detail: fmt.Sprintf("%s %s is not this exporter's for node %s, fault %s, attempt %d", k.kind, name, req.Node, req.FaultID, req.Attempt)}, nil
	}
	prog := repairProgress(req.Action, janitorStatusOf(obj))
	prog.Detail = k.kind + " " + name + ": " + prog.Detail
	return prog, nil
}

// janitorStatus is what RepairStatus reads of the janitor's status.
type janitorStatus struct {
	completed  bool
	phase      string
	conditions map[string]metav1.Condition
}

func janitorStatusOf(obj *unstructured.Unstructured) janitorStatus {
	st := janitorStatus{conditions: map[string]metav1.Condition{}}
	if ct, _, _ := unstructured.NestedString(obj.Object, "status", "completionTime"); ct != "" {
		st.completed = true
	}
	st.phase, _, _ = unstructured.NestedString(obj.Object, "status", "phase")
	// Read in place: NestedSlice deep-copies and panics on a value that is
	// not JSON.
	status, _ := obj.Object["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		cond := metav1.Condition{}
		cond.Type, _ = m["type"].(string)
		s, _ := m["status"].(string)
		cond.Status = metav1.ConditionStatus(s)
		cond.Reason, _ = m["reason"].(string)
		cond.Message, _ = m["message"].(string)
		if cond.Type != "" {
			st.conditions[cond.Type] = cond
		}
	}
	return st
}

func (s janitorStatus) is(typ string, status metav1.ConditionStatus) bool {
	c, ok := s.conditions[typ]
	return ok && c.Status == status
}

func (s janitorStatus) describe(types ...string) string {
	var parts []string
	for _, t := range types {
		if c, ok := s.conditions[t]; ok {
			part := fmt.Sprintf("%s=%s", t, c.Status)
			if c.Reason != "" {
				part += " (" + c.Reason
				if c.Message != "" {
					part += ": " + c.Message
				}
				part += ")"
			}
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return "no status from the janitor yet"
	}
	return strings.Join(parts, ", ")
}

// repairProgress maps the janitor's status to the repair's state.
func repairProgress(action repair.Action, st janitorStatus) actuator.RepairProgress {
	switch action {
	case repair.ActionReboot:
		detail := st.describe(condRebootSignalSent, condRebootNodeReady, condManualMode)
		switch {
		case st.completed && st.is(condRebootNodeReady, metav1.ConditionTrue):
			return actuator.RepairProgress{State: actuator.RepairDone, Detail: detail}
		case st.completed:
			return actuator.RepairProgress{State: actuator.RepairFailed, Detail: detail}
		}
		return actuator.RepairProgress{State: actuator.RepairPending, Detail: detail}
	case repair.ActionGPUReset:
		detail := st.describe(condResetComplete)
		if st.phase != "" {
			detail = "phase " + st.phase + ", " + detail
		}
		complete, hasComplete := st.conditions[condResetComplete]
		switch {
		case st.phase == "Succeeded" || hasComplete && complete.Status == metav1.ConditionTrue && complete.Reason == reasonResetSucceeded:
			return actuator.RepairProgress{State: actuator.RepairDone, Detail: detail}
		case st.phase == "Failed" || hasComplete && complete.Status == metav1.ConditionTrue:
			return actuator.RepairProgress{State: actuator.RepairFailed, Detail: detail}
		case st.completed:
			// Finished without a Complete condition: cannot say it worked.
			return actuator.RepairProgress{State: actuator.RepairFailed, Detail: "completionTime set without a Complete condition: " + detail}
		}
		return actuator.RepairProgress{State: actuator.RepairPending, Detail: detail}
	}
	return actuator.RepairProgress{State: actuator.RepairUnknown, Detail: fmt.Sprintf("no status for %q", action)}
}

// Drained implements actuator.Repairer: no pod is left on the node but
// the node's own: DaemonSet pods (they run on every node and are not the
// workload; a reboot restarts them) and mirror pods of static pods. Pods
// that tolerate our taint are workload like any other (a reboot or GPU
// reset would kill them): they count. Finished pods (Succeeded, Failed) do
// not; a pod being deleted counts until it is gone.
func (p *Platform) Drained(ctx context.Context, node string) (bool, string, error) {
	if node == "" {
		return false, "request names no node", nil
	}
	pods, err := p.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return false, "", fmt.Errorf("kubernetes: list the pods of node %s: %w", node, err)
	}
	var left []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName != node || // the field selector, checked again
			nodesOwn(pod) || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		left = append(left, pod.Namespace+"/"+pod.Name)
	}
	if len(left) == 0 {
		return true, fmt.Sprintf("node %s: no workload pod left", node), nil
	}
	slices.Sort(left)
	shown := left
	if len(shown) > 5 {
		shown = shown[:5]
	}
	detail := fmt.Sprintf("node %s: %d workload pod(s) left: %s", node, len(left), strings.Join(shown, ", "))
	if len(left) > len(shown) {
		detail += ", ..."
	}
	return false, detail, nil
}

// nodesOwn: a DaemonSet's pod or a static pod's mirror.
func nodesOwn(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
