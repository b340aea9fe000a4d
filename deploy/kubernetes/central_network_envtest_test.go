//go:build envtest

package kubernetes

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

// TestCentralNetworkPolicy: in the small-cluster mode the central's OTLP
// port admits this release's agents and nothing else, a training pod
// included (it must speak through its node's agent, which stamps the
// node); Prometheus in the telemetry namespace reaches the telemetry port
// only. Without the mode there is no such policy.
func TestCentralNetworkPolicy(t *testing.T) {
	objs := helmTemplate(t, scenarioByName(t, smallClusterScenario))
	sts := typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway")
	gateway := sts.Spec.Template.Spec.Containers[0]
	policies := ingressPolicies(t, objs, sts.Namespace, sts.Spec.Template.Labels)
	require.NotEmpty(t, policies, "no NetworkPolicy isolates the central for ingress")

	own := map[string]string{"kubernetes.io/metadata.name": releaseNamespace}
	training := map[string]string{trainingLabel: "true"}
	port := func(name string) int32 { return containerPort(t, gateway, name).ContainerPort }
	for _, tc := range []struct {
		peer  peer
		allow []string
	}{
		{peer{"an agent of this release", own, map[string]string{"app.kubernetes.io/name": "otelcol-gpu-agent"}}, []string{"otlp-grpc"}},
		{peer{"a training pod", map[string]string{"kubernetes.io/metadata.name": "team-a", trainingLabel: "true"}, training}, nil},
		{peer{"a pod labelled as an agent in another namespace", map[string]string{"kubernetes.io/metadata.name": "team-a"}, map[string]string{"app.kubernetes.io/name": "otelcol-gpu-agent"}}, nil},
		{peer{"Prometheus in monitoring", map[string]string{"kubernetes.io/metadata.name": "monitoring"}, map[string]string{"app.kubernetes.io/name": "prometheus"}}, []string{"telemetry"}},
	} {
		for _, name := range []string{"otlp-grpc", "telemetry", "health"} {
			want := slices.Contains(tc.allow, name)
			assert.Equal(t, want, admits(t, policies, gateway, tc.peer, port(name)),
				"%s -> central port %s: admitted %v", tc.peer.what, name, !want)
		}
	}

	for _, o := range helmTemplate(t, scenarioByName(t, productionScenario)) {
		assert.NotEqual(t, "otelcol-gpu-central", o.GetName(), "%s otelcol-gpu-central outside the small-cluster mode", o.GetKind())
	}
}
