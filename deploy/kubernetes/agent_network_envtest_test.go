//go:build envtest

package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// otlpTokenSecret holds the agents' OTLP bearer token (key "token").
	otlpTokenSecret = "otelcol-gpu-otlp-token"
	// trainingLabel opts a namespace, and a pod in it, in to sending OTLP.
	trainingLabel = "otelcol-gpu.io/training"
)

// otlpPortNames are the agent container's OTLP ports.
var otlpPortNames = []string{"otlp-grpc", "otlp-http"}

func containerPort(t *testing.T, c corev1.Container, name string) corev1.ContainerPort {
	t.Helper()
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
	require.GreaterOrEqual(t, i, 0, "%s: no port %s", c.Name, name)
	return c.Ports[i]
}

// checkAgentOTLPNodeLocal: the OTLP listener is reachable on the pod's
// address only (no hostPort, no host network) and through one ClusterIP
// Service with internalTrafficPolicy Local, so that a training pod's
// connection lands on its own node's agent.
func checkAgentOTLPNodeLocal(t *testing.T, objs []*unstructured.Unstructured, ds *appsv1.DaemonSet) {
	t.Helper()
	pod := ds.Spec.Template.Spec
	assert.False(t, pod.HostNetwork, "host network puts the OTLP port on the node's address")
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		for _, p := range c.Ports {
			assert.Zero(t, p.HostPort, "%s: port %s has hostPort %d, open to the cluster", c.Name, p.Name, p.HostPort)
			assert.Empty(t, p.HostIP, "%s: port %s", c.Name, p.Name)
		}
	}
	agent := pod.Containers[0]
	for env, name := range map[string]string{"OTLP_GRPC_ENDPOINT": "otlp-grpc", "OTLP_HTTP_ENDPOINT": "otlp-http"} {
		e := envVar(agent, env)
		if assert.NotNil(t, e, env) {
			_, p, ok := strings.Cut(e.Value, ":")
			require.True(t, ok, "%s=%s", env, e.Value)
			assert.Equal(t, strconv.Itoa(int(containerPort(t, agent, name).ContainerPort)), p, "%s listens on container port %s", env, name)
		}
	}

	// Every Service in front of the agents, by what it exposes.
	podLabels := labels.Set(ds.Spec.Template.Labels)
	var otlp []*corev1.Service
	for _, o := range objs {
		if o.GetKind() != "Service" {
			continue
		}
		svc := typed[corev1.Service](t, objs, "Service", o.GetName())
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
			continue
		}
		exposesOTLP := slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
			return slices.Contains(otlpPortNames, p.TargetPort.String()) ||
				slices.ContainsFunc(otlpPortNames, func(n string) bool {
					return p.TargetPort.IntValue() == int(containerPort(t, agent, n).ContainerPort)
				})
		})
		if !exposesOTLP {
			continue
		}
		otlp = append(otlp, svc)
	}
	require.Len(t, otlp, 1, "one Service for OTLP to the agents")
	svc := otlp[0]
	assert.Equal(t, "otelcol-gpu-agent", svc.Name)
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, "no NodePort or LoadBalancer")
	// Headless DNS would hand out every node's agent, past the policy.
	assert.NotEqual(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless")
	assert.Empty(t, svc.Spec.ExternalIPs)
	if assert.NotNil(t, svc.Spec.InternalTrafficPolicy) {
		assert.Equal(t, corev1.ServiceInternalTrafficPolicyLocal, *svc.Spec.InternalTrafficPolicy, "a pod reaches its own node's agent only")
	}
	var targets []string
	for _, p := range svc.Spec.Ports {
		targets = append(targets, p.TargetPort.String())
	}
	assert.ElementsMatch(t, otlpPortNames, targets)
}

// peer is a client of the agents: its namespace's labels and its own.
type peer struct {
	what      string
	namespace map[string]string
	pod       map[string]string
}

// checkAgentNetworkPolicy: the agents are isolated for ingress, and the
// NetworkPolicies selecting them admit OTLP from labelled training pods in
// labelled namespaces only, telemetry from namespace monitoring only, and
// nothing else, as a CNI evaluates them.
func checkAgentNetworkPolicy(t *testing.T, objs []*unstructured.Unstructured, ds *appsv1.DaemonSet) {
	t.Helper()
	agent := ds.Spec.Template.Spec.Containers[0]
	policies := ingressPolicies(t, objs, ds.Namespace, ds.Spec.Template.Labels)
	require.NotEmpty(t, policies, "no NetworkPolicy isolates the agents for ingress")

	ns := func(name string, extra map[string]string) map[string]string {
		m := map[string]string{"kubernetes.io/metadata.name": name}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	training := map[string]string{trainingLabel: "true"}
	port := func(name string) int32 { return containerPort(t, agent, name).ContainerPort }
	for _, tc := range []struct {
		peer  peer
		allow []string
	}{
		{peer{"training pod in a training namespace", ns("team-a", training), map[string]string{trainingLabel: "true", "app": "trainer"}}, otlpPortNames},
		{peer{"unlabelled pod in a training namespace", ns("team-a", training), map[string]string{"app": "notebook"}}, nil},
		{peer{"labelled pod in an unlabelled namespace", ns("default", nil), training}, nil},
		{peer{"Prometheus in monitoring", ns("monitoring", nil), map[string]string{"app.kubernetes.io/name": "prometheus"}}, []string{"telemetry"}},
		{peer{"a gateway in the agents' namespace", ns(ds.Namespace, nil), map[string]string{"app.kubernetes.io/name": "otelcol-gpu-gateway"}}, nil},
	} {
		for _, name := range []string{"otlp-grpc", "otlp-http", "telemetry", "health"} {
			want := slices.Contains(tc.allow, name)
			assert.Equal(t, want, admits(t, policies, agent, tc.peer, port(name)),
				"%s -> agent port %s: admitted %v", tc.peer.what, name, !want)
		}
	}

	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(readme), trainingLabel, "deploy/README.md must say how to label training namespaces and pods")
}

// ingressPolicies are the NetworkPolicies of namespace that select pods
// with podLabels for ingress.
func ingressPolicies(t *testing.T, objs []*unstructured.Unstructured, namespace string, podLabels map[string]string) []*networkingv1.NetworkPolicy {
	t.Helper()
	var policies []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" || o.GetNamespace() != namespace {
			continue
		}
		np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", o.GetName())
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		require.NoError(t, err)
		if sel.Matches(labels.Set(podLabels)) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			policies = append(policies, np)
		}
	}
	return policies
}

// admits evaluates NetworkPolicy ingress as the API defines it: a
// connection is admitted if some rule of some policy selecting the pod
// matches both its source and its port; a rule without ports matches every
// port, without from every source.
func admits(t *testing.T, policies []*networkingv1.NetworkPolicy, c corev1.Container, p peer, port int32) bool {
	t.Helper()
	for _, np := range policies {
		for _, rule := range np.Spec.Ingress {
			portOK := len(rule.Ports) == 0 || slices.ContainsFunc(rule.Ports, func(rp networkingv1.NetworkPolicyPort) bool {
				if rp.Protocol != nil && *rp.Protocol != corev1.ProtocolTCP {
					return false
				}
				if rp.Port == nil {
					return true
				}
				if rp.Port.Type == intstr.String {
					i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == rp.Port.StrVal })
					return i >= 0 && c.Ports[i].ContainerPort == port
				}
				end := rp.Port.IntVal
				if rp.EndPort != nil {
					end = *rp.EndPort
				}
				return port >= rp.Port.IntVal && port <= end
			})
			fromOK := len(rule.From) == 0 || slices.ContainsFunc(rule.From, func(f networkingv1.NetworkPolicyPeer) bool {
				assert.Nil(t, f.IPBlock, "NetworkPolicy %s: an ipBlock admits by address, not by workload", np.Name)
				if f.IPBlock != nil {
					return true
				}
				if f.NamespaceSelector == nil {
					// Pods of the policy's own namespace.
					if p.namespace["kubernetes.io/metadata.name"] != np.Namespace {
						return false
					}
				} else if !matches(t, f.NamespaceSelector, p.namespace) {
					return false
				}
				return f.PodSelector == nil || matches(t, f.PodSelector, p.pod)
			})
			if portOK && fromOK {
				return true
			}
		}
	}
	return false
}

func matches(t *testing.T, ls *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(ls)
	require.NoError(t, err)
	return sel.Matches(labels.Set(set))
}

// checkOTLPAuth: with agent.otlp.auth.enabled, the agent merges
// distributions/agent/otlp-auth.yaml last and reads its token from Secret
// otelcol-gpu-otlp-token, which must exist for the pod to start; without
// it, neither.
func checkOTLPAuth(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, c corev1.Container, overlay string) {
	t.Helper()
	var authArgs []string
	for _, arg := range c.Args {
		if strings.HasSuffix(arg, "/"+otlpAuthFragment) {
			authArgs = append(authArgs, arg)
		}
	}
	tokenFile := envVar(c, "OTLP_BEARER_TOKEN_FILE")
	if overlay != otlpAuthOverlay {
		assert.Empty(t, authArgs, "%s: OTLP auth is opt-in", overlay)
		assert.Nil(t, tokenFile)
		assert.Nil(t, envVar(c, "OTLP_BEARER_TOKEN"))
		return
	}
	require.Len(t, authArgs, 1)
	assert.Equal(t, c.Args[len(c.Args)-1], authArgs[0], "merged last, over every other fragment")
	assert.True(t, strings.HasPrefix(authArgs[0], "--config="), authArgs[0])
	want, err := os.ReadFile(filepath.Join(repoRoot, "distributions", "agent", otlpAuthFragment))
	require.NoError(t, err)
	assert.Equal(t, string(want), mountedConfigMapFile(t, objs, pod, c, strings.TrimPrefix(authArgs[0], "--config=")),
		"not distributions/agent/%s (run deploy/helm/sync.sh)", otlpAuthFragment)

	require.NotNil(t, tokenFile, "OTLP_BEARER_TOKEN_FILE")
	assert.Nil(t, envVar(c, "OTLP_BEARER_TOKEN"), "the token from a file, not the pod spec")
	v, file := mountedVolume(t, pod, c, tokenFile.Value)
	require.NotNil(t, v.Secret, "%s is not from a Secret", tokenFile.Value)
	assert.Equal(t, otlpTokenSecret, v.Secret.SecretName)
	assert.False(t, v.Secret.Optional != nil && *v.Secret.Optional, "without the token the agent must not start")
	key := file
	for _, item := range v.Secret.Items {
		if item.Path == file {
			key = item.Key
		}
	}
	assert.Equal(t, "token", key)
	// Mounted as a directory (no subPath), so a rotated Secret reaches the
	// running agent.
	m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
	require.GreaterOrEqual(t, m, 0)
	assert.Empty(t, c.VolumeMounts[m].SubPath, "a subPath mount never sees the rotated token")
	assert.True(t, c.VolumeMounts[m].ReadOnly)
}
