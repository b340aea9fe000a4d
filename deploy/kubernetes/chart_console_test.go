package kubernetes

import (
	"bytes"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// consoleTokenSecret is ci/console-values.yaml's
	// gateway.console.tokenSecret, a Secret the user creates (key token).
	consoleTokenSecret = "otelcol-gpu-console-token"
	// consoleTokenFile is where the gateway reads the console's token.
	consoleTokenFile = "/etc/otelcol-gpu/console/token"
)

// gatewayContainer is the rendered gateway StatefulSet's pod and container.
func gatewayContainer(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.StatefulSet, corev1.Container) {
	t.Helper()
	sts := typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway")
	require.Len(t, sts.Spec.Template.Spec.Containers, 1)
	return sts, sts.Spec.Template.Spec.Containers[0]
}

// TestChartConsole: gateway.console (ci/console-values.yaml) merges the
// console fragment of the mode (console.yaml, or small-cluster-console.yaml
// after small-cluster.yaml) after every other shipped fragment and before
// gateway.extraConfig, listens on the pod's address at the console port,
// reads its token from the user's Secret mounted read-only as a directory
// (mode 0440), links traces and logs as the values say, and serves through
// a ClusterIP Service; the defaults render none of it.
func TestChartConsole(t *testing.T) {
	for _, tc := range []struct {
		scenario, fragment string
		before             []string
	}{
		{consoleScenario, "console.yaml", []string{"config.yaml"}},
		{smallClusterConsoleScenario, "small-cluster-console.yaml", []string{"config.yaml", "small-cluster.yaml"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			objs := helmTemplate(t, scenarioByName(t, tc.scenario))
			sts, gw := gatewayContainer(t, objs)
			pod := sts.Spec.Template.Spec

			var want []string
			for _, f := range append(slices.Clone(tc.before), tc.fragment) {
				want = append(want, "--config=/etc/otelcol-gpu/"+f)
			}
			want = append(want, "--config=/etc/otelcol-gpu/console-tls.yaml") // the chart's TLS
			assert.Equal(t, want, gw.Args, "the console's fragment after the mode's")
			source, err := os.ReadFile(filepath.Join(repoRoot, "distributions", "gateway", tc.fragment))
			require.NoError(t, err)
			cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-gateway-config")
			assert.Equal(t, string(source), cm.Data[tc.fragment], "ConfigMap otelcol-gpu-gateway-config: not distributions/gateway/%s (run deploy/helm/sync.sh)", tc.fragment)
			// The fragment reads what the chart sets.
			for _, name := range []string{"OTELCOL_GPU_CONSOLE_ENDPOINT", "OTELCOL_GPU_CONSOLE_TOKEN_FILE", "OTELCOL_GPU_CONSOLE_TRACE_URL", "OTELCOL_GPU_CONSOLE_LOGS_URL"} {
				assert.Contains(t, string(source), "${env:"+name, "distributions/gateway/%s no longer reads %s", tc.fragment, name)
			}

			for name, value := range map[string]string{
				"OTELCOL_GPU_CONSOLE_ENDPOINT":   "0.0.0.0:8787",
				"OTELCOL_GPU_CONSOLE_TOKEN_FILE": consoleTokenFile,
				"OTELCOL_GPU_CONSOLE_TRACE_URL":  "http://jaeger-query.monitoring.svc:16686/trace/{trace_id}",
				"OTELCOL_GPU_CONSOLE_LOGS_URL":   "http://victorialogs.monitoring.svc:9428/select/vmui/?query=fault.id:{fault_id}",
			} {
				e := envVar(gw, name)
				if assert.NotNil(t, e, name) {
					assert.Equal(t, value, e.Value, name)
					assert.Nil(t, e.ValueFrom, name)
				}
			}
			assert.Contains(t, gw.Ports, corev1.ContainerPort{Name: "console", ContainerPort: 8787, Protocol: corev1.ProtocolTCP})

			// The token: the Secret's key token as a file of a read-only
			// directory mount (a subPath mount never sees a rotation).
			m := slices.IndexFunc(gw.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.MountPath == filepath.Dir(consoleTokenFile)
			})
			require.GreaterOrEqual(t, m, 0, "no mount at %s", filepath.Dir(consoleTokenFile))
			mount := gw.VolumeMounts[m]
			assert.True(t, mount.ReadOnly, "the token's mount is read-only")
			assert.Empty(t, mount.SubPath)
			v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
			require.GreaterOrEqual(t, v, 0, "no volume %s", mount.Name)
			secret := pod.Volumes[v].Secret
			require.NotNil(t, secret, "volume %s is not a Secret", mount.Name)
			assert.Equal(t, consoleTokenSecret, secret.SecretName)
			assert.Equal(t, []corev1.KeyToPath{{Key: "token", Path: filepath.Base(consoleTokenFile)}}, secret.Items)
			require.NotNil(t, secret.DefaultMode)
			assert.Equal(t, int32(0o440), *secret.DefaultMode, "the token readable by the gateway's group only")
			assert.False(t, secret.Optional != nil && *secret.Optional, "without the token the gateway must not start")

			svc := typed[corev1.Service](t, objs, "Service", "otelcol-gpu-gateway-console")
			assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, "no NodePort or LoadBalancer")
			if tc.scenario == smallClusterConsoleScenario {
				assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless: every replica, the owner among them (one central, no forwarding)")
			} else {
				assert.Empty(t, svc.Spec.ClusterIP, "ClusterIP: any replica, a standby forwards controls to the owner")
			}
			assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)), "the Service selects the gateways")
			require.Len(t, svc.Spec.Ports, 1)
			assert.EqualValues(t, 8787, svc.Spec.Ports[0].Port)
			assert.Equal(t, intstr.FromString("console"), svc.Spec.Ports[0].TargetPort)
		})
	}

	t.Run("default", func(t *testing.T) {
		objs := helmTemplate(t, scenarioByName(t, defaultScenario))
		sts, gw := gatewayContainer(t, objs)
		for _, arg := range gw.Args {
			assert.NotContains(t, arg, "console", "the console is off by default")
		}
		for _, e := range gw.Env {
			assert.False(t, strings.HasPrefix(e.Name, "OTELCOL_GPU_CONSOLE_"), "%s without the console", e.Name)
		}
		assert.False(t, slices.ContainsFunc(gw.Ports, func(p corev1.ContainerPort) bool { return p.Name == "console" }))
		assert.False(t, slices.ContainsFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "console-token" }))
		for _, o := range objs {
			assert.NotEqual(t, "otelcol-gpu-gateway-console", o.GetName(), "%s without the console", o.GetKind())
		}
	})

	t.Run("port and order", func(t *testing.T) {
		// Another port; the Service off; extraConfig still merged last.
		objs := helmTemplate(t, scenarioByName(t, consoleScenario), "--set", "gateway.console.port=9443",
			"--set", "gateway.console.service.enabled=false", "--set", "gateway.console.traceURL=",
			"--set", "gateway.extraConfig.processors.batch.timeout=1s")
		_, gw := gatewayContainer(t, objs)
		assert.Equal(t, []string{
			"--config=/etc/otelcol-gpu/config.yaml",
			"--config=/etc/otelcol-gpu/console.yaml",
			"--config=/etc/otelcol-gpu/console-tls.yaml",
			"--config=/etc/otelcol-gpu/extra-config.yaml",
		}, gw.Args, "gateway.extraConfig over the console's fragment")
		assert.Equal(t, "0.0.0.0:9443", envVar(gw, "OTELCOL_GPU_CONSOLE_ENDPOINT").Value)
		assert.Contains(t, gw.Ports, corev1.ContainerPort{Name: "console", ContainerPort: 9443, Protocol: corev1.ProtocolTCP})
		assert.Nil(t, envVar(gw, "OTELCOL_GPU_CONSOLE_TRACE_URL"), "no trace link: the fragment's empty default")
		for _, o := range objs {
			assert.NotEqual(t, "otelcol-gpu-gateway-console", o.GetName(), "%s with service.enabled false", o.GetKind())
		}
	})
}

// TestChartConsoleRefusals: the chart never makes the console's token, and
// a value it cannot use fails the render naming it.
func TestChartConsoleRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no token Secret", []string{"gateway.console.enabled=true"}, "gateway.console.tokenSecret: name an existing Secret with key token"},
		{"no token Secret, small cluster", []string{"gateway.console.enabled=true", "smallCluster.enabled=true"}, "gateway.console.tokenSecret: name an existing Secret"},
		{"port out of range", []string{"gateway.console.enabled=true", "gateway.console.tokenSecret=t", "gateway.console.port=70000"}, "gateway.console.port: 70000 is not a port"},
		{"port not a number", []string{"gateway.console.enabled=true", "gateway.console.tokenSecret=t", "gateway.console.port=http"}, "gateway.console.port: http is not a port"},
		{"port taken", []string{"gateway.console.enabled=true", "gateway.console.tokenSecret=t", "gateway.console.port=13134"}, "gateway.console.port: 13134 is already the gateway's"},
		{"namespaces not a list", []string{"gateway.console.enabled=true", "gateway.console.tokenSecret=t", "gateway.console.allowedNamespaces=monitoring"}, "gateway.console.allowedNamespaces: monitoring is not a list"},
		{"labels for a selector", []string{"gateway.console.enabled=true", "gateway.console.tokenSecret=t", "gateway.console.allowedPodSelector.app=grafana"}, `gateway.console.allowedPodSelector: "app" is not a field of a label selector`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", releaseName, chartDir, "--namespace", releaseNamespace}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(helmBin(t), args...)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.Error(t, err, "helm template rendered:\n%.2000s", out)
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
	// Enabled with a Secret named and a certificate, the same render passes.
	objs := helmTemplate(t, scenarioByName(t, defaultScenario), "--set", "gateway.console.enabled=true", "--set", "gateway.console.tokenSecret=t",
		"--set", "gateway.console.tls.secret=c")
	_, gw := gatewayContainer(t, objs)
	assert.Contains(t, gw.Args, "--config=/etc/otelcol-gpu/console.yaml")
}
