package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// updateOptions names our field manager on every node write: the
// managedFields it leaves are how Release tells our cordon and condition
// from a later one of someone else's (ownership.go).
var updateOptions = metav1.UpdateOptions{FieldManager: FieldManager}

// conflictBackoff paces the read-modify-write retries on a node or the
// breaker's ConfigMap. The jitter spreads replicas and concurrent writers
// apart so they do not collide again on the next attempt.
var conflictBackoff = wait.Backoff{Steps: 12, Duration: 5 * time.Millisecond, Factor: 1.5, Jitter: 1, Cap: 500 * time.Millisecond}

// Platform is the Kubernetes actuator.Platform.
type Platform struct {
	client  kubernetes.Interface
	cfg     Config
	logger  *zap.Logger
	breaker *Breaker
	gpu     gpuNodes
	now     func() time.Time
	// instance is the events' reportingInstance: this replica.
	instance string
	// dyn creates and reads the repair objects (repair.go); nil unless
	// cfg.Repair asks for them.
	dyn dynamic.Interface
}

var _ actuator.Platform = (*Platform)(nil)

// Option configures New.
type Option func(*Platform)

// WithDynamicClient gives the platform the client for the repair objects
// (kubernetes.repair: nvsentinel); without it New builds one from cfg's
// credentials (NewDynamicClient) when repair asks for it.
func WithDynamicClient(dyn dynamic.Interface) Option {
	return func(p *Platform) { p.dyn = dyn }
}

// New returns a Platform acting through client; cfg must be valid.
func New(client kubernetes.Interface, cfg Config, logger *zap.Logger, opts ...Option) (*Platform, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gpu, err := newGPUNodes(cfg)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	breaker := newBreaker(client, cfg.Breaker, gpu)
	p := &Platform{client: client, cfg: cfg, logger: logger, breaker: breaker, gpu: gpu, now: time.Now, instance: reportingInstance()}
	for _, o := range opts {
		o(p)
	}
	if cfg.Repair == RepairNVSentinel && p.dyn == nil {
		if p.dyn, err = NewDynamicClient(cfg); err != nil {
			return nil, fmt.Errorf("kubernetes.repair %s: %w", cfg.Repair, err)
		}
	}
	return p, nil
}

// Name implements actuator.Platform.
func (*Platform) Name() string { return "kubernetes" }

// Breaker implements actuator.Platform.
func (p *Platform) Breaker() actuator.Breaker { return p.breaker }

// wanted is the set of Kubernetes actions a request asks for. Drain is the
// Slurm word for what a cordon does here: no new work, running work stays.
type wanted struct{ cordon, taint, condition, evict, deviceTaint bool }

func wantedActions(actions []actuator.Action) wanted {
	var w wanted
	for _, a := range actions {
		switch a {
		case actuator.ActionCordon, actuator.ActionDrain:
			w.cordon = true
		case actuator.ActionTaint:
			w.taint = true
		case actuator.ActionCondition:
			w.condition = true
		case actuator.ActionEvict:
			w.evict = true
		case actuator.ActionDeviceTaint:
			w.deviceTaint = true
		}
	}
	return w
}

// Quarantine implements actuator.Platform: cordon, taint, condition and
// eviction, each only if asked for, on a node that is not under
// maintenance and not cordoned by someone else.
func (p *Platform) Quarantine(ctx context.Context, req actuator.Request) (actuator.Result, error) {
	if req.Node == "" {
		return actuator.Result{Outcome: actuator.SkipNotFound, Detail: "request names no node"}, nil
	}
	want := wantedActions(req.Actions)
	if want == (wanted{}) {
		return actuator.Result{Outcome: actuator.AlreadyDone, Detail: "no kubernetes action requested"}, nil
	}

	// Smallest blast radius first: taint the one GPU. Where that cannot
	// be done, cordon and taint the node instead, and say why.
	var deviceDone, fallback string
	if want.deviceTaint {
		current, err := p.client.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
		if err != nil {
			return p.apiResult(req.Node, "quarantine", err)
		}
		if res, skip := p.eligible(current); skip {
			return res, nil
		}
		if deviceDone, fallback, err = p.taintDevice(ctx, req); err != nil {
			return actuator.Result{}, fmt.Errorf("device taint on node %s: %w", req.Node, err)
		}
		if fallback != "" {
			want.cordon, want.taint = true, true
			p.logger.Info("device taint not possible: cordoning and tainting the node", zap.String("node", req.Node), zap.String("why", fallback))
		}
	}

	var (
		node   *corev1.Node
		result actuator.Result
		done   []string
		wrote  bool // the node changed: a new action or a new fault id
	)
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		current, err := p.client.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node = current.DeepCopy()
		result, done, wrote = p.planQuarantine(node, req, want)
		if !wrote {
			return nil
		}
		// Update carries the resourceVersion just read: if anyone wrote
		// the node since, the API server answers Conflict and we start over
		// from their version, so their taints and labels survive.
		node, err = p.client.CoreV1().Nodes().Update(ctx, node, updateOptions)
		return err
	})
	if err != nil {
		return p.apiResult(req.Node, "quarantine", err)
	}
	if result.Outcome != actuator.Applied && result.Outcome != actuator.AlreadyDone {
		return result, nil
	}

	// A second fault on a node already ours keeps the condition the first
	// one wrote; its id is on the fault-id annotation.
	if want.condition && !(result.Outcome == actuator.AlreadyDone && conditionFalse(node, p.cfg.ConditionType)) {
		cond := corev1.NodeCondition{
			Type:    corev1.NodeConditionType(p.cfg.ConditionType),
			Status:  corev1.ConditionFalse,
			Reason:  conditionReason(req.FaultType),
			Message: req.Reason,
		}
		changed, err := p.writeCondition(ctx, node, cond, nil)
		if err != nil {
			return p.apiResult(req.Node, "condition", err)
		}
		if changed {
			done = append(done, "condition "+p.cfg.ConditionType+"=False")
		}
	}
	if want.evict {
		detail, err := p.evictGPUPods(ctx, req.Node)
		if err != nil {
			return actuator.Result{}, fmt.Errorf("evict pods on node %s: %w", req.Node, err)
		}
		done = append(done, detail)
	}
	if deviceDone != "" {
		done = append([]string{deviceDone}, done...)
	}
	if fallback != "" {
		done = append(done, "device taint not possible ("+fallback+"): node actions instead")
	}
	if len(done) > 0 {
		result.Outcome = actuator.Applied
		result.Detail = strings.Join(done, ", ")
	}
	// Every fault that newly holds the node gets its event, the second
	// fault on an already quarantined node too; a repeat gets none.
	if wrote || len(done) > 0 {
		p.recordEvent(ctx, node, corev1.EventTypeWarning, EventReasonQuarantined, "Quarantine", eventNote("quarantined", req, result.Detail))
	}
	return result, nil
}

// planQuarantine changes node in place and says what it did. It changes
// nothing on a node under maintenance, cordoned by someone else or without
// a GPU: checked again on the version it writes, whatever Check said.
func (p *Platform) planQuarantine(node *corev1.Node, req actuator.Request, want wanted) (actuator.Result, []string, bool) {
	if res, skip := p.eligible(node); skip {
		return res, nil, false
	}

	// A cordon of ours a human lifted is forgotten (eligible left only an
	// uncordoned node here); asked for again, it is a new cordon of ours.
	forgot := forgetCordon(node)
	var done []string
	if want.cordon && !node.Spec.Unschedulable {
		node.Spec.Unschedulable = true
		setAnnotation(node, AnnotationCordonedBy, Owner)
		done = append(done, "cordoned")
	}
	if want.taint {
		taint := corev1.Taint{Key: p.cfg.TaintKey, Value: labelValue(req.FaultType), Effect: corev1.TaintEffect(p.cfg.TaintEffect)}
		if taints, added := mergeTaint(node.Spec.Taints, taint); added {
			node.Spec.Taints = taints
			// Recorded exactly, so Release removes this taint and no other.
			setAnnotation(node, AnnotationTaint, taint.ToString())
			done = append(done, "tainted "+taint.ToString())
		}
	}

	changed := len(done) > 0 || forgot
	if node.Labels[LabelQuarantined] != "true" {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[LabelQuarantined] = "true"
		changed = true
	}
	// Every fault holding the quarantine is recorded, so that the node is
	// released only when the last one resolves.
	ids := faultIDs(node.Annotations[AnnotationFaultID])
	if req.FaultID != "" && !slices.Contains(ids, req.FaultID) {
		setAnnotation(node, AnnotationFaultID, strings.Join(append(ids, req.FaultID), ","))
		changed = true
	}

	if len(done) > 0 {
		return actuator.Result{Outcome: actuator.Applied, Detail: strings.Join(done, ", ")}, done, changed
	}
	return actuator.Result{Outcome: actuator.AlreadyDone, Detail: "node already quarantined by " + Owner}, nil, changed
}

// Release implements actuator.Platform. It undoes only what carries this
// exporter's marks and is still as it wrote it (ownership.go: a cordon a
// human lifted and set again stays), and only when the last fault holding
// the node resolves. A request without a fault id (a human's release) lets
// go of every fault.
func (p *Platform) Release(ctx context.Context, req actuator.Request) (actuator.Result, error) {
	if req.Node == "" {
		return actuator.Result{Outcome: actuator.SkipNotFound, Detail: "request names no node"}, nil
	}
	var (
		node     *corev1.Node
		result   actuator.Result
		released bool
	)
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		current, err := p.client.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node = current.DeepCopy()
		released = false
		if node.Labels[LabelQuarantined] != "true" {
			result = actuator.Result{Outcome: actuator.NotOurs, Detail: "node not quarantined by " + Owner}
			return nil
		}
		ids := faultIDs(node.Annotations[AnnotationFaultID])
		if release := req.ReleaseIDs(); len(release) > 0 {
			if !slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(release, id) }) {
				result = actuator.Result{Outcome: actuator.NotOurs, Detail: "node quarantined for fault(s) " + strings.Join(ids, ",")}
				return nil
			}
			ids = slices.DeleteFunc(ids, func(id string) bool { return slices.Contains(release, id) })
			if len(ids) > 0 {
				setAnnotation(node, AnnotationFaultID, strings.Join(ids, ","))
				result = actuator.Result{Outcome: actuator.AlreadyDone, Detail: "quarantine kept for fault(s) " + strings.Join(ids, ",")}
				node, err = p.client.CoreV1().Nodes().Update(ctx, node, updateOptions)
				return err
			}
		}

		var done []string
		if n, err := p.untaintDevices(ctx, node.Name); err != nil {
			return err
		} else if n > 0 {
			done = append(done, fmt.Sprintf("removed %d device taint rule(s)", n))
		}
		// Only what is still as we wrote it is undone (ownership.go): a
		// cordon a human lifted and set again is theirs and stays.
		if forgetCordon(node) && node.Spec.Unschedulable {
			done = append(done, "cordon kept: set again by someone else after ours")
		}
		if cordonOurs(node) {
			node.Spec.Unschedulable = false
			delete(node.Annotations, AnnotationCordonedBy)
			done = append(done, "uncordoned")
		}
		if taints, removed := removeOurTaint(node); removed {
			node.Spec.Taints = taints
			done = append(done, "removed taint "+node.Annotations[AnnotationTaint])
		}
		delete(node.Annotations, AnnotationTaint)
		delete(node.Labels, LabelQuarantined)
		delete(node.Annotations, AnnotationFaultID)
		result = actuator.Result{Outcome: actuator.Applied, Detail: strings.Join(append(done, "released"), ", ")}
		released = true
		node, err = p.client.CoreV1().Nodes().Update(ctx, node, updateOptions)
		return err
	})
	if err != nil {
		return p.apiResult(req.Node, "release", err)
	}
	if !released {
		return result, nil
	}
	// Reset the condition only where it is ours to reset: False as we set
	// it. One another writer set since (True or False) stays theirs.
	if conditionOurs(node, p.cfg.ConditionType) {
		cond := corev1.NodeCondition{
			Type:    corev1.NodeConditionType(p.cfg.ConditionType),
			Status:  corev1.ConditionTrue,
			Reason:  ReasonRecovered,
			Message: strings.TrimSpace(Owner + ": released " + req.Reason),
		}
		// Checked again on every version written: a writer that took the
		// condition over meanwhile keeps it.
		ours := func(n *corev1.Node) bool { return conditionOurs(n, p.cfg.ConditionType) }
		if changed, err := p.writeCondition(ctx, node, cond, ours); err != nil {
			return p.apiResult(req.Node, "condition", err)
		} else if changed {
			result.Detail += ", condition " + p.cfg.ConditionType + "=True"
		}
	}
	p.recordEvent(ctx, node, corev1.EventTypeNormal, EventReasonReleased, "Release", eventNote("released", req, result.Detail))
	return result, nil
}

// writeCondition sets cond on nodes/status, starting from node and
// re-reading it on conflict; with still, only on a version it accepts. It
// reports whether it wrote.
func (p *Platform) writeCondition(ctx context.Context, node *corev1.Node, cond corev1.NodeCondition, still func(*corev1.Node) bool) (bool, error) {
	var changed bool
	first := true
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		if !first {
			current, err := p.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node = current
		}
		first = false
		if still != nil && !still(node) {
			changed = false
			return nil
		}
		node = node.DeepCopy()
		now := metav1.NewTime(p.now())
		cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
		if changed = setCondition(&node.Status, cond); !changed {
			return nil
		}
		_, err := p.client.CoreV1().Nodes().UpdateStatus(ctx, node, updateOptions)
		return err
	})
	return changed, err
}

// evictGPUPods evicts the pods on node that request NVIDIA GPUs through
// the Eviction API, so disruption budgets hold. Which GPU a pod has is
// known only to the kubelet, so every GPU pod on the node goes.
func (p *Platform) evictGPUPods(ctx context.Context, nodeName string) (string, error) {
	if !p.cfg.Evict {
		return "eviction disabled", nil
	}
	pods, err := p.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
	})
	if err != nil {
		return "", err
	}
	var evicted, blocked int
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !gpuRequested(pod) || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		err := p.evict(ctx, pod)
		switch {
		case err == nil:
			evicted++
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			// A disruption budget says not now; the pod stays, the node
			// stays cordoned, and a human or the next fault decides.
			blocked++
			p.logger.Info("eviction blocked by a disruption budget", zap.String("node", nodeName), zap.String("pod", pod.Namespace+"/"+pod.Name))
		default:
			return "", fmt.Errorf("evict %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	detail := fmt.Sprintf("evicted %d GPU pod(s)", evicted)
	if blocked > 0 {
		detail += fmt.Sprintf(", %d blocked by a disruption budget", blocked)
	}
	return detail, nil
}

// evict is the typed client's Evict without its retries: a disruption
// budget answers 429 with Retry-After 10s, which client-go would retry ten
// times, holding the fault for 100 s. A blocked pod is reported instead.
func (p *Platform) evict(ctx context.Context, pod *corev1.Pod) error {
	return p.client.PolicyV1().RESTClient().Post().
		AbsPath("/api/v1").
		Namespace(pod.Namespace).
		Resource("pods").
		Name(pod.Name).
		SubResource("eviction").
		Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}).
		MaxRetries(0).
		Do(ctx).
		Error()
}

// apiResult turns an API error into the actuator's terms: a missing node is
// an outcome, a conflict that kept coming back is ErrConflict, anything
// else (API server down) is an error the exporter retries.
func (p *Platform) apiResult(node, what string, err error) (actuator.Result, error) {
	switch {
	case apierrors.IsNotFound(err):
		return actuator.Result{Outcome: actuator.SkipNotFound, Detail: "node " + node + " not found"}, nil
	case apierrors.IsConflict(err):
		return actuator.Result{}, fmt.Errorf("%s node %s: %w", what, node, errors.Join(actuator.ErrConflict, err))
	default:
		return actuator.Result{}, fmt.Errorf("%s node %s: %w", what, node, err)
	}
}

func conditionFalse(node *corev1.Node, typ string) bool {
	for _, c := range node.Status.Conditions {
		if string(c.Type) == typ {
			return c.Status == corev1.ConditionFalse
		}
	}
	return false
}

func setAnnotation(node *corev1.Node, key, value string) {
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[key] = value
}

// excluded says whether node is left alone: under maintenance, or cordoned
// by someone else.
func (p *Platform) excluded(node *corev1.Node) (actuator.Result, bool) {
	if _, ok := node.Labels[p.cfg.MaintenanceLabel]; ok && p.cfg.MaintenanceLabel != "" {
		return actuator.Result{Outcome: actuator.SkipExcluded, Detail: "node has maintenance label " + p.cfg.MaintenanceLabel}, true
	}
	// A cordon that is not ours, whatever our annotation says: a human
	// lifted ours and cordoned again (ownership.go).
	if node.Spec.Unschedulable && !cordonOurs(node) {
		return actuator.Result{Outcome: actuator.SkipForeign, Detail: "node was cordoned by someone else"}, true
	}
	return actuator.Result{}, false
}
