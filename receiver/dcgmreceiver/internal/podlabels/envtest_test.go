//go:build envtest

// Against a real kube-apiserver and etcd (controller-runtime's envtest):
// the field selector keeps other nodes' pods out, the RBAC the agent is
// given (get, list, watch pods: deploy/helm/otelcol-gpu, agent.dcgm.podLabels)
// is enough, the API server's PartialObjectMetadata answers are read, and
// a rotated service-account token file is picked up. client-go creates the
// objects (test only); the Watcher uses its own client, with a real
// service-account token. Needs `make envtest-bin`; then
//
//	go test -tags envtest ./receiver/dcgmreceiver/internal/podlabels/
package podlabels

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	authenticationv1 "k8s.io/api/authentication/v1"
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

func corePod(node, ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
}

// saToken is a token of the agent's service account, bound to the Secret
// bound when not nil.
func saToken(t *testing.T, admin kubernetes.Interface, bound *corev1.Secret) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{}
	if bound != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: bound.Name, UID: bound.UID}
	}
	tr, err := admin.CoreV1().ServiceAccounts("otelcol-gpu").CreateToken(context.Background(), "otelcol-gpu-agent", req, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// writeToken replaces the token file as the kubelet does: a new file
// renamed over the old.
func writeToken(t *testing.T, path, token string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path+".new", []byte(token), 0o600))
	require.NoError(t, os.Rename(path+".new", path))
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
		corePod("gpu-1", "training", "mine", map[string]string{"app.kubernetes.io/name": "llama"}),
		corePod("gpu-2", "training", "theirs", map[string]string{"app.kubernetes.io/name": "other"}),
	} {
		_, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	// The agent's service account, as the chart binds it, and its token in
	// a file, as the kubelet mounts it.
	_, err = admin.CoreV1().ServiceAccounts("otelcol-gpu").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "otelcol-gpu-agent"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, saToken(t, admin, nil))
	agent, err := NewClient(Config{Host: cfg.Host, CAData: cfg.CAData, TokenFile: tokenFile, UserAgent: "podlabels envtest"})
	require.NoError(t, err)

	// Without the binding: forbidden, logged once.
	core, logs := observer.New(zap.InfoLevel)
	denied, err := New(agent, Settings{Node: "gpu-1"}, zap.New(core))
	require.NoError(t, err)
	denied.Start()
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("cannot watch").Len() > 0 }, 30*time.Second, 20*time.Millisecond)
	denied.Stop()
	assert.Nil(t, denied.Labels("training", "mine"))
	assert.Equal(t, 1, logs.FilterMessageSnippet("cannot watch").Len(), "logged once")

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

	// The API server sends the pods' metadata only, listed and watched.
	resp, err := agent.get(ctx, podsPath, w.query(), acceptList)
	require.NoError(t, err)
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "PartialObjectMetadataList", list.Kind)
	assert.Len(t, list.Items, 1)
	q := w.query()
	q.Set("watch", "true")
	q.Set("resourceVersion", "0") // starts with an ADDED for each pod
	resp, err = agent.get(ctx, podsPath, q, acceptWatch)
	require.NoError(t, err)
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Kind string `json:"kind"`
		} `json:"object"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ev))
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, "PartialObjectMetadata", ev.Object.Kind)

	// A pod created on this node later is seen.
	_, err = admin.CoreV1().Pods("training").Create(ctx, corePod("gpu-1", "training", "later", map[string]string{"team": "ml"}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(w.Labels("training", "later")) == 1 }, 30*time.Second, 20*time.Millisecond)

	// Relabelled, then deleted: seen.
	p, err := admin.CoreV1().Pods("training").Get(ctx, "later", metav1.GetOptions{})
	require.NoError(t, err)
	p.Labels = map[string]string{"team": "infra"}
	_, err = admin.CoreV1().Pods("training").Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l := w.Labels("training", "later")
		return len(l) == 1 && l[0].Value == "infra"
	}, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, admin.CoreV1().Pods("training").Delete(ctx, "later", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	require.Eventually(t, func() bool { return w.Labels("training", "later") == nil }, 30*time.Second, 20*time.Millisecond)

	t.Run("rotated token file", func(t *testing.T) {
		// The first token is bound to a Secret: deleting it revokes the
		// token, as the end of a bound token's life does.
		secret, err := admin.CoreV1().Secrets("otelcol-gpu").Create(ctx,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-token-1"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		first := saToken(t, admin, secret)
		file := filepath.Join(t.TempDir(), "token")
		writeToken(t, file, first)
		client, err := NewClient(Config{Host: cfg.Host, CAData: cfg.CAData, TokenFile: file})
		require.NoError(t, err)
		core, logs := observer.New(zap.InfoLevel)
		w, err := New(client, Settings{Node: "gpu-1"}, zap.New(core))
		require.NoError(t, err)
		w.minWatch = 2 * time.Second // watches end every 2 to 4 s: each new one sends the token
		w.Start()
		t.Cleanup(w.Stop)
		require.Eventually(t, w.HasSynced, 30*time.Second, 20*time.Millisecond)

		// Rotated: the new token in the file, the old one revoked.
		writeToken(t, file, saToken(t, admin, nil))
		require.NoError(t, admin.CoreV1().Secrets("otelcol-gpu").Delete(ctx, secret.Name, metav1.DeleteOptions{}))
		old, err := NewClient(Config{Host: cfg.Host, CAData: cfg.CAData, Token: first})
		require.NoError(t, err)
		t.Cleanup(old.CloseIdleConnections)
		require.Eventually(t, func() bool {
			_, err := old.get(ctx, podsPath, w.query(), acceptList)
			var s *StatusError
			return errors.As(err, &s) && s.Code == http.StatusUnauthorized
		}, 30*time.Second, 50*time.Millisecond, "the first token is revoked")

		// Two requests sent after the revocation: the first has been
		// answered, with the token the file held then.
		sent := client.sent.Load()
		_, err = admin.CoreV1().Pods("training").Create(ctx, corePod("gpu-1", "training", "rotated", map[string]string{"team": "ml"}), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return len(w.Labels("training", "rotated")) == 1 && client.sent.Load() >= sent+2
		}, 30*time.Second, 20*time.Millisecond)
		assert.Zero(t, logs.FilterMessageSnippet("cannot watch").Len(), "the new token is read before the old one is refused")
	})
}
