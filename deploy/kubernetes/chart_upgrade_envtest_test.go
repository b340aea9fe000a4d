//go:build envtest

package kubernetes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// helmAgainst is the environment of a helm CLI that reaches env's API
// server only, through a kubeconfig for a user of system:masters, with its
// own state (cache, repositories) in the test's directory.
func helmAgainst(t *testing.T, env *envtest.Environment) []string {
	t.Helper()
	admin, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	require.NoError(t, err)
	kubeconfig, err := admin.KubeConfig()
	require.NoError(t, err)
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfigPath, kubeconfig, 0o600))
	return []string{
		"KUBECONFIG=" + kubeconfigPath,
		"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"),
	}
}

// TestHelmUpgradeGatewayPersistence: UPGRADING.md's procedure, with the
// real helm CLI against the envtest API server. Turning
// gateway.persistence on changes the StatefulSet's volumeClaimTemplates,
// which the API server refuses to update, so helm upgrade fails saying
// so; after the StatefulSet is deleted with --cascade=orphan the same
// upgrade passes and the gateways' data is a claim.
func TestHelmUpgradeGatewayPersistence(t *testing.T) {
	cfg, env := startAPIServer(t)
	c := newAPIClient(t, cfg)
	ctx := context.Background()
	helmEnv := helmAgainst(t, env)
	s := scenarioByName(t, devScenario)
	base := append([]string{releaseName, chartDir, "--namespace", releaseNamespace}, s.valuesArgs()...)

	out := runHelm(t, helmEnv, append([]string{"install", "--create-namespace"}, base...)...)
	assert.Contains(t, string(out), "STATUS: deployed")
	sts := gatewayStatefulSet(t, c)
	assert.Empty(t, sts.Spec.VolumeClaimTemplates, "persistence off: an emptyDir")

	persist := append([]string{"upgrade"}, append(base, "--set", "gateway.persistence.enabled=true")...)
	var stderr strings.Builder
	cmd := exec.Command(helmBin(t), persist...)
	cmd.Env = append(os.Environ(), helmEnv...)
	cmd.Stderr = &stderr
	_, err := cmd.Output()
	require.Error(t, err, "helm upgrade changed volumeClaimTemplates in place")
	for _, want := range []string{`StatefulSet.apps "otelcol-gpu-gateway" is invalid: spec.volumeClaimTemplates`, "field is immutable"} {
		assert.Contains(t, stderr.String(), want, "the error UPGRADING.md quotes")
	}

	// kubectl delete statefulset otelcol-gpu-gateway --cascade=orphan.
	// envtest runs no garbage collector, whose part is to orphan the pods
	// (there are none: no controllers run either) and then drop the
	// orphan finalizer: the test drops it.
	res, err := c.resource(toUnstructured(t, sts))
	require.NoError(t, err)
	orphan := metav1.DeletePropagationOrphan
	require.NoError(t, res.Delete(ctx, sts.Name, metav1.DeleteOptions{PropagationPolicy: &orphan}))
	left, err := res.Get(ctx, sts.Name, metav1.GetOptions{})
	if err == nil {
		assert.Contains(t, left.GetFinalizers(), metav1.FinalizerOrphanDependents, "deleted with --cascade=orphan")
		_, err = res.Patch(ctx, sts.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		t.Logf("StatefulSet deleted with propagation Orphan; its orphan finalizer dropped as the garbage collector would")
	}

	out = runHelm(t, helmEnv, persist...)
	assert.Contains(t, string(out), "STATUS: deployed")
	sts = gatewayStatefulSet(t, c)
	require.Len(t, sts.Spec.VolumeClaimTemplates, 1)
	assert.Equal(t, "data", sts.Spec.VolumeClaimTemplates[0].Name)
	assert.False(t, slices.ContainsFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "data" }),
		"the data volume is the claim, not an emptyDir")
	status := runHelm(t, helmEnv, "status", releaseName, "--namespace", releaseNamespace)
	assert.Contains(t, string(status), "STATUS: deployed")
}

// gatewayStatefulSet reads the gateway StatefulSet from the API server.
func gatewayStatefulSet(t *testing.T, c *apiClient) *appsv1.StatefulSet {
	return readObject[appsv1.StatefulSet](t, c, "StatefulSet", "otelcol-gpu-gateway")
}

// agentDaemonSet reads the agent DaemonSet from the API server.
func agentDaemonSet(t *testing.T, c *apiClient) *appsv1.DaemonSet {
	return readObject[appsv1.DaemonSet](t, c, "DaemonSet", "otelcol-gpu-agent")
}

// readObject reads the release namespace's apps/v1 object kind/name.
func readObject[T any](t *testing.T, c *apiClient, kind, name string) *T {
	t.Helper()
	ref := &unstructured.Unstructured{}
	ref.SetAPIVersion("apps/v1")
	ref.SetKind(kind)
	ref.SetNamespace(releaseNamespace)
	res, err := c.resource(ref)
	require.NoError(t, err)
	got, err := res.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	obj := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, obj))
	return obj
}

func toUnstructured(t *testing.T, sts *appsv1.StatefulSet) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sts)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind("StatefulSet")
	return u
}

// Issue 31: a helm upgrade rolls a workload's pods only where its own
// configuration changed. The pod templates carry their config's checksum:
// an upgrade with the same values leaves both templates as they were
// (generation unchanged), one that changes the agent's configuration only
// changes the DaemonSet's template and leaves the gateway's.
func TestHelmUpgradeRollsOnlyWhatChanged(t *testing.T) {
	cfg, env := startAPIServer(t)
	c := newAPIClient(t, cfg)
	helmEnv := helmAgainst(t, env)
	s := scenarioByName(t, devScenario)
	base := append([]string{releaseName, chartDir, "--namespace", releaseNamespace}, s.valuesArgs()...)
	runHelm(t, helmEnv, append([]string{"install", "--create-namespace"}, base...)...)
	ds0, sts0 := agentDaemonSet(t, c), gatewayStatefulSet(t, c)

	runHelm(t, helmEnv, append([]string{"upgrade"}, base...)...)
	ds1, sts1 := agentDaemonSet(t, c), gatewayStatefulSet(t, c)
	assert.Equal(t, ds0.Generation, ds1.Generation, "the same values: the agents' template unchanged")
	assert.Equal(t, sts0.Generation, sts1.Generation, "the same values: the gateways' template unchanged")

	agentChange := append(append([]string{"upgrade"}, base...),
		"--set-json", `agent.extraConfig={"processors":{"batch":{"timeout":"2s"}}}`)
	runHelm(t, helmEnv, agentChange...)
	ds2, sts2 := agentDaemonSet(t, c), gatewayStatefulSet(t, c)
	assert.Greater(t, ds2.Generation, ds1.Generation, "the agents' configuration changed: their template too")
	assert.NotEqual(t, ds1.Spec.Template.Annotations["checksum/config"], ds2.Spec.Template.Annotations["checksum/config"])
	assert.Equal(t, sts1.Generation, sts2.Generation, "the gateways' configuration did not change: their pods stay")
	assert.Equal(t, sts1.Spec.Template.Annotations, sts2.Spec.Template.Annotations)
}

// Issue 31: helm upgrade from the chart as it last landed (3c7b899,
// testdata/previous-chart) to this checkout's, with the same values: the
// upgrade passes (no immutable field changed, the new schema accepts the
// values users had) and every workload is there.
func TestHelmUpgradeFromThePreviousChart(t *testing.T) {
	cfg, env := startAPIServer(t)
	c := newAPIClient(t, cfg)
	helmEnv := helmAgainst(t, env)
	s := scenarioByName(t, devScenario)
	previous := filepath.Join("testdata", "previous-chart", "otelcol-gpu-0.2.0-3c7b899.tgz")

	install := append([]string{"install", "--create-namespace", releaseName, previous, "--namespace", releaseNamespace}, s.valuesArgs()...)
	assert.Contains(t, string(runHelm(t, helmEnv, install...)), "STATUS: deployed")
	before := agentDaemonSet(t, c).Generation

	upgrade := append([]string{"upgrade", releaseName, chartDir, "--namespace", releaseNamespace}, s.valuesArgs()...)
	assert.Contains(t, string(runHelm(t, helmEnv, upgrade...)), "STATUS: deployed")
	history := string(runHelm(t, helmEnv, "history", releaseName, "--namespace", releaseNamespace))
	assert.Contains(t, history, "Install complete")
	assert.Contains(t, history, "Upgrade complete")
	assert.GreaterOrEqual(t, agentDaemonSet(t, c).Generation, before)
	assert.Equal(t, "otelcol-gpu-gateway", gatewayStatefulSet(t, c).Name)
}
