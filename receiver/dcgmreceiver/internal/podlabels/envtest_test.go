//go:build envtest

// Against a real kube-apiserver and etcd (controller-runtime's envtest):
// the field selector keeps other nodes' pods out, and the RBAC the agent is
// given (get, list, watch pods: deploy/helm/otelcol-gpu, agent.dcgm.podLabels)
// is enough. Needs `make envtest-bin`; then
//
//	go test -tags envtest ./receiver/dcgmreceiver/internal/podlabels/
package podlabels

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	dir := os.Getenv("ENVTEST_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", ".tools", "envtest-bin")
	}
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Fatalf("envtest binary %s missing in %s: run tools/envtest/build.sh (or make envtest-bin) first", bin, dir)
		}
	}
	ctrllog.SetLogger(logr.Discard())
	useExisting := false
	env := &envtest.Environment{BinaryAssetsDirectory: dir, UseExistingCluster: &useExisting}
	cfg, err := env.Start()
	require.NoError(t, err, "start kube-apiserver and etcd")
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })
	return cfg
}

func TestEnvtestWatcherOwnNodeOnlyWithAgentRBAC(t *testing.T) {
	cfg := startAPIServer(t)
	admin, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	for _, ns := range []string{"training", "otelcol-gpu"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, p := range []*corev1.Pod{
		pod("gpu-1", "training", "mine", map[string]string{"app.kubernetes.io/name": "llama"}),
		pod("gpu-2", "training", "theirs", map[string]string{"app.kubernetes.io/name": "other"}),
	} {
		_, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The agent's service account, as the chart binds it.
	agentCfg := rest.CopyConfig(cfg)
	agentCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent"}
	agent, err := kubernetes.NewForConfig(agentCfg)
	require.NoError(t, err)

	// Without the binding: forbidden, logged once.
	core, logs := observer.New(zap.InfoLevel)
	denied, err := New(agent, Settings{Node: "gpu-1"}, zap.New(core))
	require.NoError(t, err)
	denied.Start()
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("cannot watch").Len() > 0 }, 30*time.Second, 20*time.Millisecond)
	denied.Stop()
	assert.Nil(t, denied.Labels("training", "mine"))

	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "otelcol-gpu-agent-pod-labels"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "otelcol-gpu-agent-pod-labels"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "otelcol-gpu-agent-pod-labels"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "otelcol-gpu", Name: "otelcol-gpu-agent"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var w *Watcher
	require.Eventually(t, func() bool { // RBAC caches settle
		if w != nil {
			w.Stop()
		}
		w, err = New(agent, Settings{Node: "gpu-1"}, nil)
		require.NoError(t, err)
		w.Start()
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && !w.HasSynced() {
			time.Sleep(20 * time.Millisecond)
		}
		return w.HasSynced()
	}, 60*time.Second, 10*time.Millisecond)
	t.Cleanup(w.Stop)
	assert.Equal(t, []Label{{Name: "app_kubernetes_io_name", Key: "app.kubernetes.io/name", Value: "llama"}}, w.Labels("training", "mine"))
	assert.Nil(t, w.Labels("training", "theirs"), "another node's pod is not watched")

	// A pod created on this node later is seen.
	_, err = admin.CoreV1().Pods("training").Create(ctx, pod("gpu-1", "training", "later", map[string]string{"team": "ml"}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(w.Labels("training", "later")) == 1 }, 30*time.Second, 20*time.Millisecond)
}
