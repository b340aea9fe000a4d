//go:build envtest

package kubernetes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleNetworkPolicy: in the small-cluster mode the central's
// NetworkPolicy admits to the console port exactly the namespaces of
// gateway.console.allowedNamespaces and the pods of the release's namespace
// matching allowedPodSelector (ci/console-values.yaml: monitoring, and
// label otelcol-gpu.io/console-client), and keeps its other rules: the
// agents reach OTLP only, not the console. With neither set no rule admits
// anyone to the console (kubectl port-forward still reaches it).
func TestConsoleNetworkPolicy(t *testing.T) {
	objs := helmTemplate(t, scenarioByName(t, smallClusterConsoleScenario))
	sts, gw := gatewayContainer(t, objs)
	policies := ingressPolicies(t, objs, sts.Namespace, sts.Spec.Template.Labels)
	require.NotEmpty(t, policies, "no NetworkPolicy isolates the central for ingress")

	own := map[string]string{"kubernetes.io/metadata.name": releaseNamespace}
	client := map[string]string{"otelcol-gpu.io/console-client": "true"}
	port := func(name string) int32 { return containerPort(t, gw, name).ContainerPort }
	peers := []struct {
		peer  peer
		allow []string
	}{
		{peer{"a labelled client in the release's namespace", own, client}, []string{"console"}},
		{peer{"an unlabelled pod in the release's namespace", own, map[string]string{"app": "other"}}, nil},
		{peer{"a labelled client in another namespace", map[string]string{"kubernetes.io/metadata.name": "team-a"}, client}, nil},
		{peer{"a pod in monitoring", map[string]string{"kubernetes.io/metadata.name": "monitoring"}, map[string]string{"app.kubernetes.io/name": "grafana"}}, []string{"console", "telemetry"}},
		{peer{"an agent of this release", own, map[string]string{"app.kubernetes.io/name": "otelcol-gpu-agent"}}, []string{"otlp-grpc"}},
	}
	for _, tc := range peers {
		for _, name := range []string{"console", "otlp-grpc", "telemetry", "health"} {
			want := false
			for _, a := range tc.allow {
				want = want || a == name
			}
			assert.Equal(t, want, admits(t, policies, gw, tc.peer, port(name)),
				"%s -> central port %s: admitted %v", tc.peer.what, name, !want)
		}
	}

	// Neither list: the console port admits nobody.
	file := filepath.Join(t.TempDir(), "closed-values.yaml")
	require.NoError(t, os.WriteFile(file, []byte("gateway:\n  console:\n    allowedNamespaces: []\n    allowedPodSelector: null\n"), 0o600))
	objs = helmTemplate(t, scenarioByName(t, smallClusterConsoleScenario), "-f", file)
	sts, gw = gatewayContainer(t, objs)
	policies = ingressPolicies(t, objs, sts.Namespace, sts.Spec.Template.Labels)
	require.NotEmpty(t, policies)
	for _, tc := range peers {
		assert.False(t, admits(t, policies, gw, tc.peer, port("console")), "%s -> console without allowed peers", tc.peer.what)
	}
}

// TestGatewayConsoleForwardPolicy: in the Kafka mode with the console and
// forwarding (production plus ci/console-values.yaml), the gateway's
// NetworkPolicy, as a CNI evaluates it, admits a gateway replica (a
// standby forwarding a control) to another's console port and nowhere
// else, besides the configured clients; an agent reaches no gateway port.
// Forwarding off: the gateways do not reach each other's console.
func TestGatewayConsoleForwardPolicy(t *testing.T) {
	own := map[string]string{"kubernetes.io/metadata.name": releaseNamespace}
	gateway := peer{"another gateway replica", own, map[string]string{"app.kubernetes.io/name": "otelcol-gpu-gateway"}}
	peers := []struct {
		peer  peer
		allow []string
	}{
		{gateway, []string{"console"}},
		{peer{"a labelled client in the release's namespace", own, map[string]string{"otelcol-gpu.io/console-client": "true"}}, []string{"console"}},
		{peer{"an agent of this release", own, map[string]string{"app.kubernetes.io/name": "otelcol-gpu-agent"}}, nil},
		{peer{"a gateway-labelled pod in another namespace", map[string]string{"kubernetes.io/metadata.name": "team-a"}, gateway.pod}, nil},
	}
	objs := helmTemplate(t, productionConsole)
	sts, gw := gatewayContainer(t, objs)
	policies := ingressPolicies(t, objs, sts.Namespace, sts.Spec.Template.Labels)
	require.NotEmpty(t, policies)
	port := func(name string) int32 { return containerPort(t, gw, name).ContainerPort }
	for _, tc := range peers {
		for _, name := range []string{"console", "telemetry", "health"} {
			want := false
			for _, a := range tc.allow {
				want = want || a == name
			}
			assert.Equal(t, want, admits(t, policies, gw, tc.peer, port(name)), "%s -> gateway port %s: admitted %v", tc.peer.what, name, !want)
		}
	}

	objs = helmTemplate(t, productionConsole, "--set", "gateway.console.forward.enabled=false")
	sts, gw = gatewayContainer(t, objs)
	policies = ingressPolicies(t, objs, sts.Namespace, sts.Spec.Template.Labels)
	assert.False(t, admits(t, policies, gw, gateway, port("console")), "no forwarding: the gateways do not reach each other's console")
}
