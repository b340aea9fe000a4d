package podlabels

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels/fakeapi"
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

func pod(node, ns, name string, labels map[string]string) fakeapi.Pod {
	return fakeapi.Pod{Namespace: ns, Name: name, Node: node, Labels: labels}
}

// fakeServer serves pods through the fake API server (any token).
func fakeServer(t *testing.T, pods ...fakeapi.Pod) *fakeapi.Server {
	t.Helper()
	srv := fakeapi.New(t, "")
	for _, p := range pods {
		srv.Put(p)
	}
	return srv
}

// client reaches srv with Config c (its Host and CA filled in).
func client(t *testing.T, srv *fakeapi.Server, c Config) *Client {
	t.Helper()
	c.Host, c.CAData = srv.URL(), srv.CAPEM()
	cl, err := NewClient(c)
	require.NoError(t, err)
	return cl
}

// newWatcher returns a Watcher of node through client, not started, with
// a backoff of milliseconds.
func newWatcher(t *testing.T, client *Client, s Settings, logger *zap.Logger) *Watcher {
	t.Helper()
	w, err := New(client, s, logger)
	require.NoError(t, err)
	w.backoff = backoff{initial: time.Millisecond, max: 10 * time.Millisecond}
	t.Cleanup(w.Stop)
	return w
}

// watch starts a Watcher of node through client and waits for its first
// list.
func watch(t *testing.T, client *Client, s Settings, logger *zap.Logger) *Watcher {
	t.Helper()
	w := newWatcher(t, client, s, logger)
	w.Start()
	require.Eventually(t, w.HasSynced, 30*time.Second, 10*time.Millisecond)
	return w
}

func TestWatcherFollowsLabels(t *testing.T) {
	many := map[string]string{}
	for i := range MaxLabelsPerPod + 5 {
		many["k"+strings.Repeat("x", i)] = "v"
	}
	srv := fakeServer(t,
		pod("gpu-1", "training", "llama-0", map[string]string{"app.kubernetes.io/name": "llama", "team": "ml"}),
		pod("gpu-1", "training", "noisy", many),
		pod("gpu-1", "training", "long", map[string]string{"ok": "v", "long": strings.Repeat("v", MaxValueLen+1),
			strings.Repeat("k", MaxKeyLen+1): "v"}),
	)
	core, logs := observer.New(zap.InfoLevel)
	w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, zap.New(core))

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
	srv.Put(pod("gpu-1", "training", "llama-0", map[string]string{"team": "infra"}))
	require.Eventually(t, func() bool {
		l := w.Labels("training", "llama-0")
		return len(l) == 1 && l[0].Value == "infra"
	}, 30*time.Second, 10*time.Millisecond)

	// A deleted pod: its labels go.
	srv.Delete("training", "llama-0")
	require.Eventually(t, func() bool { return w.Labels("training", "llama-0") == nil }, 30*time.Second, 10*time.Millisecond)
}

func TestWatcherAllowlist(t *testing.T) {
	srv := fakeServer(t, pod("gpu-1", "training", "p", map[string]string{
		"app.kubernetes.io/name": "llama", "app.kubernetes.io/version": "1", "team": "ml", "pod-template-hash": "abc"}))
	w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1", Allowlist: []string{`^app\.kubernetes\.io/name$`, "^team$"}}, nil)
	assert.Equal(t, []Label{
		{Name: "app_kubernetes_io_name", Key: "app.kubernetes.io/name", Value: "llama"},
		{Name: "team", Key: "team", Value: "ml"},
	}, w.Labels("training", "p"))
}

func TestNewRefusesBadSettings(t *testing.T) {
	cl := client(t, fakeServer(t), Config{})
	_, err := New(cl, Settings{}, nil)
	assert.ErrorContains(t, err, "node name is empty")
	_, err = New(nil, Settings{Node: "n"}, nil)
	assert.ErrorContains(t, err, "no API client")
	_, err = New(cl, Settings{Node: "n", Allowlist: []string{"ok", "(open"}}, nil)
	assert.ErrorContains(t, err, `allowlist: [1] "(open"`)
}
