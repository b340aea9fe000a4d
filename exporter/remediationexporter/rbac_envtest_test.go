//go:build envtest

package remediationexporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
)

// rbacDir is deploy/rbac, two levels above this package.
var rbacDir = filepath.Join("..", "..", "deploy", "rbac")

const (
	gatewayServiceAccount = "otelcol-gpu-gateway"
	gatewayUser           = "system:serviceaccount:" + k8s.DefaultNamespace + ":" + gatewayServiceAccount
)

// applyKustomization creates every object of the resources a
// kustomization.yaml lists (files, or folders with their own
// kustomization.yaml), as `kubectl apply -k` would.
func applyKustomization(t *testing.T, client kubernetes.Interface, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	var k struct {
		Resources []string `json:"resources"`
	}
	require.NoError(t, yaml.Unmarshal(b, &k))
	require.NotEmpty(t, k.Resources)
	for _, res := range k.Resources {
		path := filepath.Join(dir, res)
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			applyKustomization(t, client, path)
			continue
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
		require.NoError(t, err, path)
		createObject(t, client, path, obj)
	}
}

func createObject(t *testing.T, client kubernetes.Interface, path string, obj any) {
	t.Helper()
	ctx := context.Background()
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.ClusterRole:
		_, err = client.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	default:
		t.Fatalf("%s: unexpected object %T in deploy/rbac", path, obj)
	}
	require.NoError(t, err, path)
}

// asGateway is a client acting as the gateway's service account.
func asGateway(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: gatewayUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + k8s.DefaultNamespace, "system:authenticated"},
	}
	client, err := kubernetes.NewForConfig(c)
	require.NoError(t, err)
	return client
}

// testRBAC applies deploy/rbac and performs the platform's operations as
// the gateway's service account: everything it needs is allowed, nothing
// more.
func testRBAC(t *testing.T, cp *controlPlane) {
	ctx := context.Background()
	applyKustomization(t, cp.client, rbacDir)
	cp.createGPUNodes(t, "rbac", "rbac001", "rbac002")
	sa := asGateway(t, cp.cfg)

	// The authorizer sees new bindings through its informers: wait for them.
	require.Eventually(t, func() bool {
		_, err := sa.CoreV1().Nodes().Get(ctx, "rbac001", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the service account never got nodes/get")

	cfg := k8s.NewDefaultConfig()
	cfg.GPUNodeSelector = poolLabel + "=rbac"
	cfg.Breaker.MaxShare = 1
	cfg.Breaker.Name = "breaker-rbac"
	cfg.Evict = true
	p, err := k8s.New(sa, cfg, zaptest.NewLogger(t))
	require.NoError(t, err)

	// Check before the breaker (get and list nodes).
	elig, err := p.Check(ctx, actuator.Request{Node: "rbac001"})
	require.NoError(t, err)
	assert.Empty(t, elig.Skip, elig.Detail)
	assert.Equal(t, 2, elig.GPUNodes)

	// Admit in the breaker (list nodes, create and update the ConfigMap),
	// and refund (update it).
	at := time.Now()
	admitted, err := p.Breaker().Admit(ctx, "rbac002", at)
	require.NoError(t, err)
	assert.True(t, admitted)
	require.NoError(t, p.Breaker().Refund(ctx, "rbac002", at))
	admitted, err = p.Breaker().Admit(ctx, "rbac001", time.Now())
	require.NoError(t, err)
	assert.True(t, admitted)
	tripped, err := p.Breaker().Tripped(ctx)
	require.NoError(t, err)
	assert.False(t, tripped)

	// Quarantine: cordon, taint (update nodes), condition (nodes/status).
	res, err := p.Quarantine(ctx, actuator.Request{Node: "rbac001", FaultID: "f-rbac-1", FaultType: "gpu.memory.dbe",
		Severity: "P1", Reason: "gpu.memory.dbe f-rbac-1",
		Actions: []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}})
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	node := cp.node(t, "rbac001")
	assert.True(t, quarantined(node))
	assert.Equal(t, corev1.ConditionFalse, gpuHealthy(node))

	// Release: the same verbs.
	res, err = p.Release(ctx, actuator.Request{Node: "rbac001", FaultID: "f-rbac-1", Reason: "resolved"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)

	// Take the lease (get, create, update leases).
	leader, err := k8s.NewLeader(sa, k8s.LeaseConfig{Namespace: k8s.DefaultNamespace, Name: "leader-rbac", Duration: 2 * time.Second},
		"rbac-test", zaptest.NewLogger(t), nil)
	require.NoError(t, err)
	require.NoError(t, leader.Start(ctx))
	require.Eventually(t, leader.IsLeader, 30*time.Second, 10*time.Millisecond, "the service account could not take the lease")
	leader.Stop()

	// Not allowed: deleting or creating nodes, secrets, and (eviction not
	// bound) listing pods.
	err = sa.CoreV1().Nodes().Delete(ctx, "rbac002", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "delete node: %v", err)
	_, err = sa.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rogue"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "create node: %v", err)
	_, err = sa.CoreV1().Secrets(k8s.DefaultNamespace).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "list secrets: %v", err)
	_, err = sa.CoreV1().ConfigMaps("kube-system").Get(ctx, "breaker-rbac", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "configmaps outside otelcol-gpu: %v", err)
	_, err = sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "list pods without the eviction binding: %v", err)

	// A GPU pod on rbac002: eviction fails until deploy/rbac/eviction is
	// applied, then works.
	_, err = cp.client.CoreV1().Pods(k8s.DefaultNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: k8s.DefaultNamespace},
		Spec: corev1.PodSpec{NodeName: "rbac002", Containers: []corev1.Container{{
			Name: "trainer", Image: "trainer:latest",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	evictReq := actuator.Request{Node: "rbac002", FaultID: "f-rbac-2", FaultType: "gpu.memory.dbe", Severity: "P1",
		Reason: "gpu.memory.dbe f-rbac-2", Actions: []actuator.Action{actuator.ActionCordon, actuator.ActionEvict}}
	_, err = p.Quarantine(ctx, evictReq)
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "evict without the eviction binding: %v", err)

	applyKustomization(t, cp.client, filepath.Join(rbacDir, "eviction"))
	require.Eventually(t, func() bool {
		_, err := sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the service account never got pods/list")
	res, err = p.Quarantine(ctx, evictReq)
	require.NoError(t, err)
	assert.Contains(t, res.Detail, "evicted 1 GPU pod(s)")
	err = sa.CoreV1().Pods(k8s.DefaultNamespace).Delete(ctx, "trainer", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "eviction, not deletion: %v", err)
}
