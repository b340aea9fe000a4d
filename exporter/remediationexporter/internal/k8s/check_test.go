package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGPUNodes(t *testing.T) {
	cfg := NewDefaultConfig()
	cfg.GPUNodeSelector = "pool=a"
	g, err := newGPUNodes(cfg)
	require.NoError(t, err)
	node := func(labels map[string]string, capacity, allocatable string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
		if capacity != "" {
			n.Status.Capacity = corev1.ResourceList{resourceGPU: resource.MustParse(capacity)}
		}
		if allocatable != "" {
			n.Status.Allocatable = corev1.ResourceList{resourceGPU: resource.MustParse(allocatable)}
		}
		return n
	}
	for name, c := range map[string]struct {
		node *corev1.Node
		gpu  bool
	}{
		"capacity":          {node(map[string]string{"pool": "a"}, "8", ""), true},
		"allocatable":       {node(map[string]string{"pool": "a"}, "", "1"), true},
		"label":             {node(map[string]string{"pool": "a", "nvidia.com/gpu.present": "true"}, "", ""), true},
		"label false":       {node(map[string]string{"pool": "a", "nvidia.com/gpu.present": "false"}, "", ""), false},
		"zero":              {node(map[string]string{"pool": "a"}, "0", "0"), false},
		"control plane":     {node(map[string]string{"pool": "a", "node-role.kubernetes.io/control-plane": ""}, "", ""), false},
		"outside selector":  {node(map[string]string{"pool": "b"}, "8", "8"), false},
		"no labels at all":  {node(nil, "8", ""), false},
		"selector and both": {node(map[string]string{"pool": "a", "nvidia.com/gpu.present": "true"}, "8", "8"), true},
	} {
		assert.Equal(t, c.gpu, g.isGPUNode(c.node), name)
		assert.Equal(t, c.gpu, g.noGPU(c.node) == "", name)
	}

	// Any mark of ours makes the node ours, GPU or not.
	for name, mark := range map[string]func(*corev1.Node){
		"label":      func(n *corev1.Node) { n.Labels = map[string]string{LabelQuarantined: "true"} },
		"annotation": func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationCordonedBy: Owner} },
		"taint":      func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: DefaultTaintKey, Effect: "NoSchedule"}} },
	} {
		n := node(nil, "", "")
		assert.False(t, g.ours(n))
		mark(n)
		assert.True(t, g.ours(n), name)
		assert.Empty(t, g.noGPU(n), name)
	}

	// "key" alone: any value.
	cfg.GPUNodeLabel, cfg.GPUNodeSelector = "example.com/gpu", ""
	g, err = newGPUNodes(cfg)
	require.NoError(t, err)
	assert.True(t, g.hasGPU(node(map[string]string{"example.com/gpu": "h200"}, "", "")))
	assert.False(t, g.hasGPU(node(map[string]string{"nvidia.com/gpu.present": "true"}, "", "")))
	cfg.GPUNodeLabel = ""
	g, err = newGPUNodes(cfg)
	require.NoError(t, err)
	assert.False(t, g.hasGPU(node(map[string]string{"nvidia.com/gpu.present": "true"}, "", "")), "capacity only")
}
