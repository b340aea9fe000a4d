//go:build envtest

package k8s

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// checkPool keeps these scenarios' counts to their own nodes.
const checkPool = "otelcol-gpu.io/test-pool"

// createPlainNode creates a node without nvidia.com/gpu capacity: a
// control-plane or CPU node, unless mutate gives it a GPU label.
func createPlainNode(t *testing.T, client kubernetes.Interface, name string, mutate func(*corev1.Node)) *corev1.Node {
	t.Helper()
	node := createGPUNode(t, client, name, mutate)
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	node.Status.Allocatable = node.Status.Capacity
	node, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{})
	require.NoError(t, err)
	return node
}

func inPool(pool string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[checkPool] = pool }
}

func testCheck(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, func(c *Config) { c.GPUNodeSelector = checkPool + "=check" })
	createGPUNode(t, client, "chk-gpu", inPool("check"))
	createPlainNode(t, client, "chk-cp", func(n *corev1.Node) {
		inPool("check")(n)
		n.Labels["node-role.kubernetes.io/control-plane"] = ""
	})
	createPlainNode(t, client, "chk-label", func(n *corev1.Node) {
		inPool("check")(n)
		n.Labels["nvidia.com/gpu.present"] = "true" // GPU feature discovery; the device plugin is not up
	})
	alloc := createPlainNode(t, client, "chk-alloc", inPool("check"))
	alloc.Status.Allocatable = corev1.ResourceList{resourceGPU: resource.MustParse("7")}
	_, err := client.CoreV1().Nodes().UpdateStatus(ctx, alloc, metav1.UpdateOptions{})
	require.NoError(t, err)
	createGPUNode(t, client, "chk-maint", func(n *corev1.Node) {
		inPool("check")(n)
		n.Labels[DefaultMaintenanceLabel] = "bios"
	})
	createGPUNode(t, client, "chk-foreign", func(n *corev1.Node) {
		inPool("check")(n)
		n.Spec.Unschedulable = true
	})
	createGPUNode(t, client, "chk-other-pool", inPool("elsewhere"))

	for node, want := range map[string]actuator.Outcome{
		"chk-ghost":      actuator.SkipNotFound,
		"chk-cp":         actuator.SkipNoGPU,
		"chk-maint":      actuator.SkipExcluded,
		"chk-foreign":    actuator.SkipForeign,
		"chk-other-pool": actuator.SkipNoGPU, // outside gpu_node_selector: not counted, so not quarantined
		"chk-gpu":        "",
		"chk-label":      "",
		"chk-alloc":      "",
	} {
		elig, err := p.Check(ctx, actuator.Request{Node: node})
		require.NoError(t, err, node)
		assert.Equal(t, want, elig.Skip, "%s: %s", node, elig.Detail)
	}
	elig, err := p.Check(ctx, actuator.Request{Node: "chk-ghost"})
	require.NoError(t, err)
	assert.Equal(t, "node chk-ghost not found", elig.Detail)
	elig, err = p.Check(ctx, actuator.Request{Node: "chk-cp"})
	require.NoError(t, err)
	assert.Equal(t, "node chk-cp has no GPU: no label nvidia.com/gpu.present=true and no nvidia.com/gpu capacity or allocatable", elig.Detail)

	// Counts: gpu, label, alloc, maint, foreign are GPU nodes of the pool.
	elig, err = p.Check(ctx, actuator.Request{Node: "chk-gpu"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{GPUNodes: 5}, elig)
	res, err := p.Quarantine(ctx, dbeRequest("chk-gpu", "f-chk"))
	require.NoError(t, err)
	require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	elig, err = p.Check(ctx, actuator.Request{Node: "chk-gpu"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{Ours: true, GPUNodes: 5, Quarantined: 1}, elig, "our marks, read back")
	elig, err = p.Check(ctx, actuator.Request{Node: "chk-label"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{GPUNodes: 5, Quarantined: 1}, elig)

	// A node of ours whose GPUs are gone (fell off the bus) is still ours
	// and still counted.
	gone := getNode(t, client, "chk-gpu")
	gone.Status.Capacity, gone.Status.Allocatable = nil, nil
	_, err = client.CoreV1().Nodes().UpdateStatus(ctx, gone, metav1.UpdateOptions{})
	require.NoError(t, err)
	elig, err = p.Check(ctx, actuator.Request{Node: "chk-gpu"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{Ours: true, GPUNodes: 4, Quarantined: 1}, elig)

	// Check writes nothing.
	before := getNode(t, client, "chk-label")
	_, err = p.Check(ctx, actuator.Request{Node: "chk-label"})
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, getNode(t, client, "chk-label").ResourceVersion)
}

// A node without a GPU is never quarantined, whether the exporter asks
// Check first or Quarantine straight away.
func testNoGPU(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, nil)
	before := createPlainNode(t, client, "nogpu-cp", nil)
	res, err := p.Quarantine(ctx, dbeRequest("nogpu-cp", "f-nogpu"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNoGPU, res.Outcome, res.Detail)
	after := getNode(t, client, "nogpu-cp")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "nothing written")
	assert.False(t, after.Spec.Unschedulable)
	assert.NotContains(t, after.Labels, LabelQuarantined)

	// The device taint path asks too.
	res, err = p.Quarantine(ctx, deviceTaintRequest("nogpu-cp", "GPU-x", "f-nogpu-dra"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNoGPU, res.Outcome, res.Detail)

	// gpu_node_label configured away: the label alone no longer makes a GPU node.
	labelled := newPlatform(t, client, func(c *Config) { c.GPUNodeLabel = "example.com/accelerator=h200" })
	createPlainNode(t, client, "nogpu-nfd", func(n *corev1.Node) { n.Labels["nvidia.com/gpu.present"] = "true" })
	createPlainNode(t, client, "nogpu-h200", func(n *corev1.Node) { n.Labels["example.com/accelerator"] = "h200" })
	res, err = labelled.Quarantine(ctx, dbeRequest("nogpu-nfd", "f-nfd"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNoGPU, res.Outcome, res.Detail)
	res, err = labelled.Quarantine(ctx, dbeRequest("nogpu-h200", "f-h200"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
}

func testBreakerRefund(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	p := newPlatform(t, client, func(c *Config) {
		c.GPUNodeSelector = checkPool + "=refund"
		c.Breaker.MaxShare = 0.5
		c.Breaker.Name = "breaker-refund"
	})
	createGPUNode(t, client, "ref-1", inPool("refund"))
	createGPUNode(t, client, "ref-2", inPool("refund"))
	now := time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)

	// The budget is one node: refunded, the slot is there again.
	ok, err := p.Breaker().Admit(ctx, "ref-1", now)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, p.Breaker().Refund(ctx, "ref-1", now))
	ok, err = p.Breaker().Admit(ctx, "ref-2", now.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, ok, "the refunded slot")

	// An admission of a node counted earlier in the window refunds nothing.
	ok, err = p.Breaker().Admit(ctx, "ref-2", now.Add(2*time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, p.Breaker().Refund(ctx, "ref-2", now.Add(2*time.Minute)))
	ok, err = p.Breaker().Admit(ctx, "ref-1", now.Add(3*time.Minute))
	require.NoError(t, err)
	assert.False(t, ok, "ref-2 still holds the one slot")
}
