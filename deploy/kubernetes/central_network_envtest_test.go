//go:build envtest

package kubernetes

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	var policies []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", o.GetName())
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		require.NoError(t, err)
		if sel.Matches(labels.Set(sts.Spec.Template.Labels)) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			policies = append(policies, np)
		}
	}
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
