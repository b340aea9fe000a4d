//go:build envtest

package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const (
	// smallClusterFragment is distributions/{agent,gateway}/small-cluster.yaml.
	smallClusterFragment = "small-cluster.yaml"
	// The small cluster's Secret (value smallCluster.tlsSecret), which the
	// user creates. There is no token Secret: each agent presents its own
	// pod's ServiceAccount token.
	centralTLSSecret = "otelcol-gpu-central-tls"
	// centralAudience is the agents' tokens' audience
	// (smallCluster.agentToken.audience).
	centralAudience = "otelcol-gpu-central"
)

// checkSmallCluster: without Kafka, the agent merges
// distributions/agent/small-cluster.yaml and sends to Service
// otelcol-gpu-central over TLS with its own pod's projected ServiceAccount
// token (no Secret shared by the agents); the gateway merges
// distributions/gateway/small-cluster.yaml, serves that OTLP with its
// certificate and checks those tokens with TokenReviews, which its
// ServiceAccount may create.
func checkSmallCluster(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, c corev1.Container, distribution string) {
	t.Helper()
	i := slices.Index(c.Args, "--config=/etc/otelcol-gpu/"+smallClusterFragment)
	require.Positive(t, i, "%s: --config=.../%s after the shipped config in %v", c.Name, smallClusterFragment, c.Args)
	want, err := os.ReadFile(filepath.Join(repoRoot, "distributions", distribution, smallClusterFragment))
	require.NoError(t, err)
	assert.Equal(t, string(want), mountedConfigMapFile(t, objs, pod, c, strings.TrimPrefix(c.Args[i], "--config=")),
		"%s: not distributions/%s/%s (run deploy/helm/sync.sh)", c.Name, distribution, smallClusterFragment)

	// secretFile: the env var names a file of Secret secret's key, mounted
	// as a directory (a rotated Secret reaches the running collector).
	secretFile := func(env, secret, key string) {
		t.Helper()
		e := envVar(c, env)
		if !assert.NotNil(t, e, "%s: %s", c.Name, env) {
			return
		}
		v, file := mountedVolume(t, pod, c, e.Value)
		require.NotNil(t, v.Secret, "%s: %s is not from a Secret", c.Name, e.Value)
		assert.Equal(t, secret, v.Secret.SecretName, "%s: %s", c.Name, env)
		k := file
		for _, item := range v.Secret.Items {
			if item.Path == file {
				k = item.Key
			}
		}
		assert.Equal(t, key, k, "%s: %s", c.Name, env)
		m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
		require.GreaterOrEqual(t, m, 0)
		assert.Empty(t, c.VolumeMounts[m].SubPath, "%s: a subPath mount never sees a rotation", env)
	}

	svc := typed[corev1.Service](t, objs, "Service", "otelcol-gpu-central")
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, "no NodePort or LoadBalancer")
	require.Len(t, svc.Spec.Ports, 1, "OTLP/gRPC only")
	if distribution == "agent" {
		assert.Equal(t, "otelcol-gpu-central."+releaseNamespace+".svc:4317", envVar(c, "OTELCOL_GPU_CENTRAL_ENDPOINT").Value)
		assert.EqualValues(t, 4317, svc.Spec.Ports[0].Port)
		secretFile("OTELCOL_GPU_CENTRAL_CA_FILE", centralTLSSecret, "ca.crt")
		assert.Nil(t, envVar(c, "OTELCOL_GPU_CENTRAL_TOKEN"), "the token from a file, not the pod spec")
		// The token: this pod's own, projected for the central's audience,
		// expiring (the kubelet renews it; the agent re-reads the file).
		e := envVar(c, "OTELCOL_GPU_CENTRAL_TOKEN_FILE")
		require.NotNil(t, e)
		v, file := mountedVolume(t, pod, c, e.Value)
		require.NotNil(t, v.Projected, "%s: the central token is not a projected volume", c.Name)
		require.Len(t, v.Projected.Sources, 1)
		sat := v.Projected.Sources[0].ServiceAccountToken
		require.NotNil(t, sat, "%s: the central token is not a ServiceAccount token", c.Name)
		assert.Equal(t, file, sat.Path)
		assert.Equal(t, centralAudience, sat.Audience)
		require.NotNil(t, sat.ExpirationSeconds)
		assert.EqualValues(t, 3600, *sat.ExpirationSeconds)
		m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
		assert.Empty(t, c.VolumeMounts[m].SubPath, "a subPath mount never sees the kubelet's renewal")
		// No Secret on the agent but the central's CA: nothing one node
		// holds lets it speak for another.
		for _, vol := range pod.Volumes {
			if vol.Secret != nil {
				assert.Equal(t, centralTLSSecret, vol.Secret.SecretName, "%s: Secret volume %s mounted on every node", c.Name, vol.Name)
			}
			if vol.Projected != nil {
				for _, src := range vol.Projected.Sources {
					assert.Nil(t, src.Secret, "%s: a Secret projected into volume %s on every node", c.Name, vol.Name)
				}
			}
		}
	} else {
		// The Service reaches the gateway's OTLP listener (the fragment's
		// default address, 0.0.0.0:4317).
		sts := typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway")
		assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)), "Service otelcol-gpu-central selects the gateway")
		assert.Equal(t, "otlp-grpc", svc.Spec.Ports[0].TargetPort.String())
		assert.EqualValues(t, 4317, containerPort(t, c, "otlp-grpc").ContainerPort)
		assert.Nil(t, envVar(c, "OTELCOL_GPU_CENTRAL_LISTEN"), "the fragment's default listen address, 0.0.0.0:4317")
		secretFile("OTELCOL_GPU_CENTRAL_TLS_CERT_FILE", centralTLSSecret, "tls.crt")
		secretFile("OTELCOL_GPU_CENTRAL_TLS_KEY_FILE", centralTLSSecret, "tls.key")
		assert.Nil(t, envVar(c, "OTELCOL_GPU_AGENT_TOKENS_FILE"), "no tokens file: the agents' ServiceAccount tokens")
		assert.Equal(t, releaseNamespace+"/otelcol-gpu-agent", envVar(c, "OTELCOL_GPU_AGENT_SERVICE_ACCOUNT").Value)
		assert.Equal(t, centralAudience, envVar(c, "OTELCOL_GPU_AGENT_TOKEN_AUDIENCE").Value)
		// The DaemonSet's pods run as that ServiceAccount.
		ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent")
		assert.Equal(t, "otelcol-gpu-agent", ds.Spec.Template.Spec.ServiceAccountName)
		// The gateway may create TokenReviews, and nothing more through
		// this binding.
		crb := typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "otelcol-gpu-central-tokenreview")
		assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sts.Spec.Template.Spec.ServiceAccountName, Namespace: releaseNamespace}}, crb.Subjects)
		role := typed[rbacv1.ClusterRole](t, objs, "ClusterRole", crb.RoleRef.Name)
		assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}, role.Rules)
	}
	checkSecretsResolvable(t, objs, pod, append(externalSecrets(t), centralTLSSecret))
}

// checkMonitoring: the production values add a ServiceMonitor per
// collector, scraping its metrics Service's telemetry port under the job
// name the rules and dashboards select on, and the PrometheusRule of
// deploy/prometheus/rules.yaml; every scenario ships the Grafana
// dashboards as ConfigMaps for the sidecar.
func checkMonitoring(t *testing.T, objs []*unstructured.Unstructured, overlay string) {
	t.Helper()
	var monitors, rules, pageMonitors []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceMonitor":
			if o.GetName() == "otelcol-gpu-agent-dcgm-exporter" {
				// The dcgm-exporter page's (chart_dcgm_exporter_test.go).
				pageMonitors = append(pageMonitors, o)
				continue
			}
			monitors = append(monitors, o)
		case "PrometheusRule":
			rules = append(rules, o)
		}
	}
	if overlay == dcgmExporterDropInScenario {
		assert.Len(t, pageMonitors, 1, "agent.prometheusEndpoint.serviceMonitor")
	} else {
		assert.Empty(t, pageMonitors, "agent.prometheusEndpoint is off by default")
	}
	if !isProduction(overlay) {
		assert.Empty(t, monitors, "serviceMonitor is off by default")
		assert.Empty(t, rules, "prometheusRule is off by default")
	} else {
		require.Len(t, monitors, 2)
		for _, who := range []string{"agent", "gateway"} {
			var sm struct {
				Spec struct {
					Selector  metav1.LabelSelector `json:"selector"`
					Endpoints []struct {
						Port        string `json:"port"`
						Path        string `json:"path"`
						Relabelings []struct {
							Action      string `json:"action"`
							TargetLabel string `json:"targetLabel"`
							Replacement string `json:"replacement"`
						} `json:"relabelings"`
					} `json:"endpoints"`
				} `json:"spec"`
			}
			i := slices.IndexFunc(monitors, func(o *unstructured.Unstructured) bool { return o.GetName() == "otelcol-gpu-"+who })
			require.GreaterOrEqual(t, i, 0, "ServiceMonitor otelcol-gpu-%s", who)
			b, err := yaml.Marshal(monitors[i].Object)
			require.NoError(t, err)
			require.NoError(t, yaml.Unmarshal(b, &sm))
			svc := typed[corev1.Service](t, objs, "Service", "otelcol-gpu-"+who+"-metrics")
			sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			require.NoError(t, err)
			assert.True(t, sel.Matches(labels.Set(svc.Labels)), "ServiceMonitor otelcol-gpu-%s selects Service %s", who, svc.Name)
			for _, o := range objs {
				if o.GetKind() == "Service" && o.GetName() != svc.Name && sel.Matches(labels.Set(o.GetLabels())) {
					assert.False(t, slices.ContainsFunc(typed[corev1.Service](t, objs, "Service", o.GetName()).Spec.Ports,
						func(p corev1.ServicePort) bool { return p.Name == "telemetry" }),
						"ServiceMonitor otelcol-gpu-%s would scrape Service %s too", who, o.GetName())
				}
			}
			require.Len(t, sm.Spec.Endpoints, 1)
			ep := sm.Spec.Endpoints[0]
			assert.True(t, slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }), "port %s", ep.Port)
			assert.Equal(t, "/metrics", ep.Path)
			assert.True(t, slices.ContainsFunc(ep.Relabelings, func(r struct {
				Action      string `json:"action"`
				TargetLabel string `json:"targetLabel"`
				Replacement string `json:"replacement"`
			}) bool {
				return r.TargetLabel == "job" && r.Replacement == "otelcol-gpu-"+who && (r.Action == "" || r.Action == "replace")
			}), "job=otelcol-gpu-%s, as deploy/prometheus/rules.yaml selects", who)
		}
		require.Len(t, rules, 1)
		b, err := os.ReadFile(filepath.Join("..", "prometheus", "rules.yaml"))
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, yaml.Unmarshal(b, &want))
		spec, ok := rules[0].Object["spec"].(map[string]any)
		require.True(t, ok, "PrometheusRule has no spec")
		// Compared as data: the rendered object went through YAML decoding.
		gotJSON, err := yaml.Marshal(spec)
		require.NoError(t, err)
		wantJSON, err := yaml.Marshal(want)
		require.NoError(t, err)
		assert.Equal(t, string(wantJSON), string(gotJSON), "PrometheusRule spec is not deploy/prometheus/rules.yaml")
	}

	dashboards, err := filepath.Glob(filepath.Join("..", "grafana", "dashboards", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, dashboards)
	for _, path := range dashboards {
		name := filepath.Base(path)
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		var found bool
		for _, o := range objs {
			if o.GetKind() != "ConfigMap" {
				continue
			}
			cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", o.GetName())
			data, ok := cm.Data[name]
			if !ok {
				continue
			}
			found = true
			assert.Equal(t, "1", cm.Labels["grafana_dashboard"], "ConfigMap %s: the Grafana sidecar's label", cm.Name)
			assert.Equal(t, string(want), data, "ConfigMap %s is not deploy/grafana/dashboards/%s", cm.Name, name)
		}
		assert.True(t, found, "no ConfigMap holds dashboard %s", name)
	}
}

// TestHelmInstall: the install command of the README (helm install, the
// real CLI, into the envtest API server through a kubeconfig for a user of
// system:masters) creates every object the chart renders, and helm
// uninstall removes them.
func TestHelmInstall(t *testing.T) {
	cfg, env := startAPIServer(t)
	c := newAPIClient(t, cfg)
	ctx := context.Background()

	helmEnv := helmAgainst(t, env)

	s := scenarioByName(t, productionScenario)
	// deploy/README.md, "Kubernetes": the command it shows.
	install := append([]string{"install", releaseName, chartDir, "--namespace", releaseNamespace, "--create-namespace"}, s.valuesArgs()...)
	out := runHelm(t, helmEnv, install...)
	t.Logf("helm install: %s", out)
	assert.Contains(t, string(out), "STATUS: deployed")
	// The notes name the Secrets to create (deploy/README.md's table).
	for _, secret := range []string{"otelcol-gpu-agent, otelcol-gpu-gateway (Kafka passwords)", "otelcol-gpu-cluster-ca-cert (Kafka CA)", "otelcol-gpu-remediation"} {
		assert.Contains(t, string(out), secret, "helm install's notes")
	}
	status := runHelm(t, helmEnv, "status", releaseName, "--namespace", releaseNamespace)
	assert.Contains(t, string(status), "STATUS: deployed")

	objs := helmTemplate(t, s)
	require.NotEmpty(t, objs)
	for _, obj := range objs {
		res, err := c.resource(obj)
		require.NoError(t, err)
		got, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if assert.NoError(t, err, "%s %s/%s after helm install", obj.GetKind(), obj.GetNamespace(), obj.GetName()) {
			assert.Equal(t, releaseName, got.GetAnnotations()["meta.helm.sh/release-name"], "%s %s: owned by the release", obj.GetKind(), obj.GetName())
		}
	}
	t.Logf("helm install created the %d objects the chart renders", len(objs))

	runHelm(t, helmEnv, "uninstall", releaseName, "--namespace", releaseNamespace, "--wait")
	for _, obj := range objs {
		res, err := c.resource(obj)
		require.NoError(t, err)
		got, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		// Without a garbage collector (envtest runs no controllers) an
		// object with finalizers lingers, marked for deletion.
		if err == nil {
			assert.NotNil(t, got.GetDeletionTimestamp(), "%s %s/%s still there after helm uninstall", obj.GetKind(), obj.GetNamespace(), obj.GetName())
			continue
		}
		assert.True(t, apierrors.IsNotFound(err), "%s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}
