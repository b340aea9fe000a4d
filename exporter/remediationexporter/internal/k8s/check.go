package k8s

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// gpuNodes tells GPU nodes and this exporter's quarantines apart. The
// breaker's budget, the quarantined share and the check before a
// quarantine all use it, so they agree on what a GPU node is.
type gpuNodes struct {
	labelKey, labelValue string          // gpu_node_label; "" key: none
	selector             labels.Selector // gpu_node_selector; nil: every node
	taintKey             string          // our taint: a mark of ours
}

func newGPUNodes(cfg Config) (gpuNodes, error) {
	g := gpuNodes{taintKey: cfg.TaintKey}
	if cfg.GPUNodeLabel != "" {
		key, value, err := parseGPUNodeLabel(cfg.GPUNodeLabel)
		if err != nil {
			return gpuNodes{}, fmt.Errorf("gpu_node_label %q: %w", cfg.GPUNodeLabel, err)
		}
		g.labelKey, g.labelValue = key, value
	}
	if cfg.GPUNodeSelector != "" {
		sel, err := labels.Parse(cfg.GPUNodeSelector)
		if err != nil {
			return gpuNodes{}, fmt.Errorf("gpu_node_selector: %w", err)
		}
		g.selector = sel
	}
	return g, nil
}

// listOptions lists the nodes gpu_node_selector selects.
func (g gpuNodes) listOptions() metav1.ListOptions {
	if g.selector == nil {
		return metav1.ListOptions{}
	}
	return metav1.ListOptions{LabelSelector: g.selector.String()}
}

// selected: gpu_node_selector matches node (or none is set).
func (g gpuNodes) selected(node *corev1.Node) bool {
	return g.selector == nil || g.selector.Matches(labels.Set(node.Labels))
}

// hasGPU: the GPU label, or GPUs in capacity or allocatable. The label is
// there first: a node whose GPUs all fell off the bus may report none.
func (g gpuNodes) hasGPU(node *corev1.Node) bool {
	if g.labelKey != "" {
		if v, ok := node.Labels[g.labelKey]; ok && (g.labelValue == "" || v == g.labelValue) {
			return true
		}
	}
	for _, list := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		if q, ok := list[resourceGPU]; ok && q.Sign() > 0 {
			return true
		}
	}
	return false
}

// isGPUNode: selected and with a GPU; the shares are taken of these.
func (g gpuNodes) isGPUNode(node *corev1.Node) bool { return g.selected(node) && g.hasGPU(node) }

// ours: the node carries any mark of a quarantine of ours (label, cordon
// annotation, taint). Any one counts: a half-written quarantine is counted
// rather than missed.
func (g gpuNodes) ours(node *corev1.Node) bool {
	return node.Labels[LabelQuarantined] == "true" || node.Annotations[AnnotationCordonedBy] == Owner ||
		slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == g.taintKey })
}

// noGPU says why node is not quarantined for want of a GPU; "" when it may
// be. A node already ours may be (a second fault once its GPUs are gone).
func (g gpuNodes) noGPU(node *corev1.Node) string {
	switch {
	case g.ours(node):
		return ""
	case !g.selected(node):
		return "node " + node.Name + " has no GPU for this exporter: gpu_node_selector " + g.selector.String() + " does not match it"
	case !g.hasGPU(node):
		label := "no GPU label"
		if g.labelKey != "" {
			label = "no label " + g.labelKey
			if g.labelValue != "" {
				label += "=" + g.labelValue
			}
		}
		return "node " + node.Name + " has no GPU: " + label + " and no " + string(resourceGPU) + " capacity or allocatable"
	}
	return ""
}

// count lists the selected nodes: how many are GPU nodes, and how many of
// them (and of any selected node carrying our marks) are quarantined by us.
func (g gpuNodes) count(ctx context.Context, client kubernetes.Interface) (gpu, quarantined int, err error) {
	list, err := client.CoreV1().Nodes().List(ctx, g.listOptions())
	if err != nil {
		return 0, 0, fmt.Errorf("count GPU nodes: %w", err)
	}
	for i := range list.Items {
		n := &list.Items[i]
		if g.isGPUNode(n) {
			gpu++
		}
		// A node of ours that lost its GPUs still counts: fail closed.
		if g.ours(n) {
			quarantined++
		}
	}
	return gpu, quarantined, nil
}

// eligible says whether node is left alone: under maintenance, cordoned
// by someone else, or without a GPU. Quarantine and Check both ask it.
func (p *Platform) eligible(node *corev1.Node) (actuator.Result, bool) {
	if res, skip := p.excluded(node); skip {
		return res, true
	}
	if why := p.gpu.noGPU(node); why != "" {
		return actuator.Result{Outcome: actuator.SkipNoGPU, Detail: why}, true
	}
	return actuator.Result{}, false
}

// Check implements actuator.Platform: it reads the node and the selected
// nodes, and writes nothing.
func (p *Platform) Check(ctx context.Context, req actuator.Request) (actuator.Eligibility, error) {
	if req.Node == "" {
		return actuator.Eligibility{Skip: actuator.SkipNotFound, Detail: "request names no node"}, nil
	}
	node, err := p.client.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
	if err != nil {
		res, err := p.apiResult(req.Node, "check", err)
		return actuator.Eligibility{Skip: res.Outcome, Detail: res.Detail}, err
	}
	if res, skip := p.eligible(node); skip {
		return actuator.Eligibility{Skip: res.Outcome, Detail: res.Detail}, nil
	}
	gpu, quarantined, err := p.gpu.count(ctx, p.client)
	if err != nil {
		return actuator.Eligibility{}, err
	}
	return actuator.Eligibility{Ours: p.gpu.ours(node), GPUNodes: gpu, Quarantined: quarantined}, nil
}
