//go:build envtest

// Against a real kube-apiserver and etcd (controller-runtime's envtest),
// with the TokenRequests a kubelet makes for a projected ServiceAccount
// token. Needs `make envtest-bin`; then
//
//	go test -race -count=1 -tags envtest ./extension/nodeauthextension/...
package nodeauthextension

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
)

const (
	agentNamespace = "otelcol-gpu"
	agentSA        = "otelcol-gpu-agent"
	audience       = "otelcol-gpu-central"
)

// clock is the review cache's clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func startAPIServer(t *testing.T) (*envtest.Environment, kubernetes.Interface) {
	t.Helper()
	dir := os.Getenv("ENVTEST_BIN_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".tools", "envtest-bin")
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
	admin, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return env, admin
}

// pod creates a pod of serviceAccount on node, as a DaemonSet's would be
// once scheduled (no kubelet runs here).
func pod(t *testing.T, admin kubernetes.Interface, namespace, name, serviceAccount, node string) *corev1.Pod {
	t.Helper()
	p, err := admin.CoreV1().Pods(namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			ServiceAccountName:           serviceAccount,
			AutomountServiceAccountToken: ptrTo(false),
			NodeName:                     node,
			Containers:                   []corev1.Container{{Name: "c", Image: "registry.example/c:1"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return p
}

// token is what the kubelet writes into a projected serviceAccountToken
// volume: a TokenRequest bound to the pod (or to ref).
func token(t *testing.T, admin kubernetes.Interface, namespace, serviceAccount, aud string, ref *authenticationv1.BoundObjectReference) string {
	t.Helper()
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{aud}, ExpirationSeconds: ptrTo[int64](3600), BoundObjectRef: ref},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

func boundTo(p *corev1.Pod) *authenticationv1.BoundObjectReference {
	return &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}
}

func TestEnvtestServiceAccountTokens(t *testing.T) {
	env, admin := startAPIServer(t)
	ctx := context.Background()
	for _, ns := range []string{agentNamespace, "training"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, sa := range []struct{ ns, name string }{{agentNamespace, agentSA}, {"training", "trainer"}} {
		_, err := admin.CoreV1().ServiceAccounts(sa.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	nodes := map[string]*corev1.Node{}
	for _, n := range []string{"gpu-a", "gpu-b"} {
		node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
		nodes[n] = node
	}
	agentA := pod(t, admin, agentNamespace, "otelcol-gpu-agent-a", agentSA, "gpu-a")
	agentB := pod(t, admin, agentNamespace, "otelcol-gpu-agent-b", agentSA, "gpu-b")
	trainer := pod(t, admin, "training", "llama-0", "trainer", "gpu-a")

	// The central's identity holds only "create tokenreviews", the rule the
	// chart gives the gateway's ServiceAccount in the small-cluster mode.
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "central-tokenreview"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "central-tokenreview"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "central-tokenreview"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "central"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	central, err := env.AddUser(envtest.User{Name: "central"}, nil)
	require.NoError(t, err)
	kubeconfig, err := central.KubeConfig()
	require.NoError(t, err)
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfigPath, kubeconfig, 0o600))

	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := nopSettings()
	set.TelemetrySettings = tt.NewTelemetrySettings()
	cfg := createDefaultConfig().(*Config)
	cfg.Kubernetes.ServiceAccount = agentNamespace + "/" + agentSA
	cfg.Kubernetes.Kubeconfig = kubeconfigPath
	require.NoError(t, cfg.Validate())
	ext, err := NewFactory().Create(ctx, set, cfg)
	require.NoError(t, err)
	clk := &clock{t: time.Now()}
	ext.(*nodeAuth).now = clk.now
	require.NoError(t, ext.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(func() { assert.NoError(t, ext.Shutdown(context.Background())) })
	a := ext.(*nodeAuth)

	// Each agent's token names its own pod's node.
	tokenA := token(t, admin, agentNamespace, agentSA, audience, boundTo(agentA))
	tokenB := token(t, admin, agentNamespace, agentSA, audience, boundTo(agentB))
	node, err := nodeOf(t, a, bearer(tokenA))
	require.NoError(t, err)
	assert.Equal(t, "gpu-a", node)
	node, err = nodeOf(t, a, bearer(tokenB))
	require.NoError(t, err)
	assert.Equal(t, "gpu-b", node)
	// Reviewed once per token while cached.
	_, err = nodeOf(t, a, bearer(tokenA))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{metadata.ResultAuthenticated: 2}, reviews(t, tt))

	// Refused: a training pod's token for the same audience on the same
	// node; the agent's account with another audience; the agent's account
	// bound to a Node object rather than to its pod; no JWT at all.
	for want, tok := range map[string]string{
		metadata.ReasonWrongServiceAccount: token(t, admin, "training", "trainer", audience, boundTo(trainer)),
		metadata.ReasonNotAuthenticated:    token(t, admin, agentNamespace, agentSA, "https://kubernetes.default.svc", boundTo(agentA)),
		metadata.ReasonNoNode: token(t, admin, agentNamespace, agentSA, audience,
			&authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: "gpu-b", UID: nodes["gpu-b"].UID}),
	} {
		_, err := nodeOf(t, a, bearer(tok))
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "%s: %v", want, err)
		assert.Contains(t, err.Error(), want)
	}
	_, err = nodeOf(t, a, bearer("not.a.jwt"))
	assert.Equal(t, codes.Unauthenticated, status.Code(err))

	// The agent's pod is deleted: once the cached answer expires its token
	// is refused; the other node's still works.
	require.NoError(t, admin.CoreV1().Pods(agentNamespace).Delete(ctx, agentA.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)}))
	_, err = nodeOf(t, a, bearer(tokenA))
	require.NoError(t, err, "within cache_ttl the cached answer stands")
	// Each try a cache_ttl later: the API server's own view of the pod
	// (its informer) may lag the deletion by a moment, and an answer given
	// meanwhile is held for cache_ttl again.
	require.Eventually(t, func() bool {
		clk.add(cfg.Kubernetes.CacheTTL + time.Second)
		_, err := nodeOf(t, a, bearer(tokenA))
		return status.Code(err) == codes.Unauthenticated
	}, 30*time.Second, 100*time.Millisecond, "the deleted pod's token still authenticates")
	node, err = nodeOf(t, a, bearer(tokenB))
	require.NoError(t, err)
	assert.Equal(t, "gpu-b", node)

	got := refused(t, tt)
	assert.Equal(t, int64(1), got[metadata.ReasonWrongServiceAccount])
	assert.Equal(t, int64(1), got[metadata.ReasonNoNode])
	assert.GreaterOrEqual(t, got[metadata.ReasonNotAuthenticated], int64(3))
	assert.Zero(t, got[metadata.ReasonReviewError])
}

func reviews(t *testing.T, tt *componenttest.Telemetry) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := tt.GetMetric("otelcol_nodeauth_reviews")
	require.NoError(t, err)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		r, _ := dp.Attributes.Value(attribute.Key(metadata.TelemetryAttrResult))
		out[r.AsString()] = dp.Value
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
