package podlabels

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// dcgm-exporter's names: every character outside [a-zA-Z0-9_] is one _.
func TestSanitizeLikeDCGMExporter(t *testing.T) {
	for in, want := range map[string]string{
		"app":                          "app",
		"app.kubernetes.io/name":       "app_kubernetes_io_name",
		"team-ml":                      "team_ml",
		"Tier_2":                       "Tier_2",
		"example.com/ünïcode":          "example_com__n_code",
		"kueue.x-k8s.io/queue-name":    "kueue_x_k8s_io_queue_name",
		"batch.kubernetes.io/job-name": "batch_kubernetes_io_job_name",
	} {
		assert.Equal(t, want, SanitizeName(in), in)
	}
}

func TestSanitizeBoundsAndCollisions(t *testing.T) {
	got := Sanitize(map[string]string{
		"app.kubernetes.io/name": "trainer",
		"app_kubernetes_io/name": "other", // same name: the first key in byte order wins
		"1st":                    "x",     // starts with a digit: not a label name
		"__meta":                 "x",     // reserved prefix
		"team":                   "ml",
	})
	assert.Equal(t, []Label{
		{Name: "app_kubernetes_io_name", Key: "app.kubernetes.io/name", Value: "trainer"},
		{Name: "team", Key: "team", Value: "ml"},
	}, got)
	assert.Nil(t, Sanitize(nil))
}

func pod(node, ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
}

// watch starts a Watcher of node through client and waits for its first
// list.
func watch(t *testing.T, client kubernetes.Interface, s Settings, logger *zap.Logger) *Watcher {
	t.Helper()
	w, err := New(client, s, logger)
	require.NoError(t, err)
	w.Start()
	t.Cleanup(w.Stop)
	require.Eventually(t, w.HasSynced, 30*time.Second, 10*time.Millisecond)
	return w
}

func TestWatcherFollowsLabels(t *testing.T) {
	many := map[string]string{}
	for i := range MaxLabelsPerPod + 5 {
		many["k"+strings.Repeat("x", i)] = "v"
	}
	client := fake.NewClientset(
		pod("gpu-1", "training", "llama-0", map[string]string{"app.kubernetes.io/name": "llama", "team": "ml"}),
		pod("gpu-1", "training", "noisy", many),
		pod("gpu-1", "training", "long", map[string]string{"ok": "v", "long": strings.Repeat("v", MaxValueLen+1),
			strings.Repeat("k", MaxKeyLen+1): "v"}),
	)
	core, logs := observer.New(zap.InfoLevel)
	w := watch(t, client, Settings{Node: "gpu-1"}, zap.New(core))

	assert.Equal(t, []Label{
		{Name: "app_kubernetes_io_name", Key: "app.kubernetes.io/name", Value: "llama"},
		{Name: "team", Key: "team", Value: "ml"},
	}, w.Labels("training", "llama-0"))
	assert.Len(t, w.Labels("training", "noisy"), MaxLabelsPerPod, "at most MaxLabelsPerPod labels per pod")
	assert.Equal(t, 1, logs.FilterMessageSnippet("more labels").Len(), "the pod with too many labels is logged once")
	assert.Equal(t, []Label{{Name: "ok", Key: "ok", Value: "v"}}, w.Labels("training", "long"),
		"a key or value over its bound is left out, not cut")
	assert.Nil(t, w.Labels("training", "absent"))

	// A relabelled pod: the new labels, without a restart.
	p, err := client.CoreV1().Pods("training").Get(context.Background(), "llama-0", metav1.GetOptions{})
	require.NoError(t, err)
	p.Labels = map[string]string{"team": "infra"}
	_, err = client.CoreV1().Pods("training").Update(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l := w.Labels("training", "llama-0")
		return len(l) == 1 && l[0].Value == "infra"
	}, 30*time.Second, 10*time.Millisecond)

	// A deleted pod: its labels go.
	require.NoError(t, client.CoreV1().Pods("training").Delete(context.Background(), "llama-0", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return w.Labels("training", "llama-0") == nil }, 30*time.Second, 10*time.Millisecond)
}

func TestWatcherAllowlist(t *testing.T) {
	client := fake.NewClientset(pod("gpu-1", "training", "p", map[string]string{
		"app.kubernetes.io/name": "llama", "app.kubernetes.io/version": "1", "team": "ml", "pod-template-hash": "abc"}))
	w := watch(t, client, Settings{Node: "gpu-1", Allowlist: []string{`^app\.kubernetes\.io/name$`, "^team$"}}, nil)
	assert.Equal(t, []Label{
		{Name: "app_kubernetes_io_name", Key: "app.kubernetes.io/name", Value: "llama"},
		{Name: "team", Key: "team", Value: "ml"},
	}, w.Labels("training", "p"))
}

func TestNewRefusesBadSettings(t *testing.T) {
	client := fake.NewClientset()
	_, err := New(client, Settings{}, nil)
	assert.ErrorContains(t, err, "node name is empty")
	_, err = New(client, Settings{Node: "n", Allowlist: []string{"ok", "(open"}}, nil)
	assert.ErrorContains(t, err, `allowlist: [1] "(open"`)
}
