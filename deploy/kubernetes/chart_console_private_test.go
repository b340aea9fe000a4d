package kubernetes

import (
	"bytes"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// productionConsole is production with the console (issue 29's render).
var productionConsole = scenario{"production+console", []string{"production-values.yaml", "console-values.yaml"}}

// gatewayConfig is the gateway's configuration as the collector merges its
// --config files (maps merged, everything else replaced), from the
// rendered ConfigMaps mounted where the args name them.
func gatewayConfig(t *testing.T, objs []*unstructured.Unstructured, gw corev1.Container) map[string]any {
	t.Helper()
	mounts := map[string]*corev1.ConfigMap{
		"/etc/otelcol-gpu/": typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-gateway-config"),
	}
	if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetName() == "otelcol-gpu-gateway-remediation" }) {
		mounts["/etc/otelcol-gpu-remediation/"] = typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-gateway-remediation")
	}
	merged := map[string]any{}
	for _, arg := range gw.Args {
		path, ok := strings.CutPrefix(arg, "--config=")
		require.True(t, ok, arg)
		var data string
		for dir, cm := range mounts {
			if name, ok := strings.CutPrefix(path, dir); ok {
				data, ok = cm.Data[name]
				require.True(t, ok, "%s: not in ConfigMap %s", path, cm.Name)
			}
		}
		require.NotEmpty(t, data, "%s: no ConfigMap mounted there", path)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(data), &m), path)
		mergeMaps(merged, m)
	}
	return merged
}

func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeMaps(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

var consoleEnvRef = regexp.MustCompile(`\$\{env:([A-Z0-9_]+)(?::-([^}]*))?\}`)

// resolve replaces ${env:NAME:-default} as the collector would in the
// container (its env values; a value from the downward API is kept as
// $(NAME) for the caller to judge).
func resolve(gw corev1.Container, s string) string {
	return consoleEnvRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := consoleEnvRef.FindStringSubmatch(ref)
		if e := envVar(gw, m[1]); e != nil {
			if e.ValueFrom != nil {
				return "$(" + m[1] + ")"
			}
			return e.Value
		}
		return m[2]
	})
}

// path reads a nested key of the merged config.
func path(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// plainEverywhere: every HTTP listener of the config's console and
// receivers (an endpoint key) that listens on every address has TLS.
func plainEverywhere(gw corev1.Container, cfg map[string]any) []string {
	var bad []string
	for _, section := range []string{"extensions", "receivers"} {
		comps, _ := cfg[section].(map[string]any)
		for id, c := range comps {
			if section == "extensions" && !strings.HasPrefix(id, "faultconsole") {
				continue // health_check: the kubelet's probes, plain HTTP by design
			}
			var walk func(where string, v any)
			walk = func(where string, v any) {
				m, ok := v.(map[string]any)
				if !ok {
					return
				}
				if ep, ok := m["endpoint"].(string); ok {
					host, _, err := net.SplitHostPort(resolve(gw, ep))
					ip := net.ParseIP(host)
					if err == nil && (host == "" || (ip != nil && ip.IsUnspecified())) && m["tls"] == nil {
						bad = append(bad, where+" "+resolve(gw, ep))
					}
				}
				for k, sub := range m {
					walk(where+"::"+k, sub)
				}
			}
			walk(section+"::"+id, c)
		}
	}
	slices.Sort(bad)
	return bad
}

// TestChartConsolePrivate (issue 29, hole 5): production with the console
// serves it over TLS with the certificate of the named Secret, has no
// plain-HTTP listener on every address, advertises each replica's HTTPS
// URL, isolates the gateways with a NetworkPolicy that admits the console
// only from the configured namespaces and pods and telemetry only from the
// monitoring namespace (and the console from the other gateways, to which
// a standby forwards controls), and reaches any replica through a
// ClusterIP Service (only the owner acts; a standby forwards to it).
func TestChartConsolePrivate(t *testing.T) {
	objs := helmTemplate(t, productionConsole)
	sts, gw := gatewayContainer(t, objs)
	pod := sts.Spec.Template.Spec
	cfg := gatewayConfig(t, objs, gw)

	// TLS, from the Secret, re-read for rotations.
	tls, ok := path(cfg, "extensions", "faultconsole", "tls").(map[string]any)
	require.True(t, ok, "extensions::faultconsole has no tls: %v", path(cfg, "extensions", "faultconsole"))
	assert.Equal(t, "/etc/otelcol-gpu/console-tls/tls.crt", tls["cert_file"])
	assert.Equal(t, "/etc/otelcol-gpu/console-tls/tls.key", tls["key_file"])
	assert.Equal(t, "1h", tls["reload_interval"])
	m := slices.IndexFunc(gw.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/otelcol-gpu/console-tls" })
	require.GreaterOrEqual(t, m, 0, "the certificate is not mounted")
	assert.True(t, gw.VolumeMounts[m].ReadOnly)
	v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == gw.VolumeMounts[m].Name })
	require.GreaterOrEqual(t, v, 0)
	require.NotNil(t, pod.Volumes[v].Secret)
	assert.Equal(t, "otelcol-gpu-console-tls", pod.Volumes[v].Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}}, pod.Volumes[v].Secret.Items)
	assert.Equal(t, int32(0o440), *pod.Volumes[v].Secret.DefaultMode)

	// No plain HTTP on every address, and the console's endpoint is what
	// the chart says.
	endpoint := resolve(gw, path(cfg, "extensions", "faultconsole", "endpoint").(string))
	assert.Equal(t, "0.0.0.0:8787", endpoint, "HTTPS on every address (kubectl port-forward reaches localhost)")
	assert.Empty(t, plainEverywhere(gw, cfg), "plain-HTTP listeners on every address")

	// Each replica advertises its HTTPS console to the gpu_faults group.
	assert.Equal(t, "${env:OTELCOL_GPU_CONSOLE_ADVERTISE_URL:-}", path(cfg, "receivers", "gpu_faults", "console_url"))
	assert.Equal(t, "${env:KAFKA_GROUP_INSTANCE_ID:-}", path(cfg, "receivers", "gpu_faults", "member_name"))
	assert.Equal(t, "https://$(KAFKA_GROUP_INSTANCE_ID).otelcol-gpu-gateway.otelcol-gpu.svc:8787", envVar(gw, "OTELCOL_GPU_CONSOLE_ADVERTISE_URL").Value)
	podName := envVar(gw, "KAFKA_GROUP_INSTANCE_ID")
	require.NotNil(t, podName.ValueFrom)
	assert.Equal(t, "metadata.name", podName.ValueFrom.FieldRef.FieldPath)
	assert.Less(t, slices.IndexFunc(gw.Env, func(e corev1.EnvVar) bool { return e.Name == "KAFKA_GROUP_INSTANCE_ID" }),
		slices.IndexFunc(gw.Env, func(e corev1.EnvVar) bool { return e.Name == "OTELCOL_GPU_CONSOLE_ADVERTISE_URL" }),
		"$(KAFKA_GROUP_INSTANCE_ID) expands only after its definition")

	// A NetworkPolicy selects the gateway pods, for ingress.
	var selecting []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", o.GetName())
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		require.NoError(t, err)
		if np.Namespace == sts.Namespace && sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
			selecting = append(selecting, np)
		}
	}
	require.Len(t, selecting, 1, "one NetworkPolicy selects the gateway pods")
	np := selecting[0]
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
	byPort := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		require.NotEmpty(t, rule.From, "a rule without from admits everyone")
		require.NotEmpty(t, rule.Ports, "a rule without ports admits every port")
		for _, p := range rule.Ports {
			require.NotNil(t, p.Port)
			byPort[p.Port.String()] = append(byPort[p.Port.String()], rule.From...)
		}
	}
	ns := func(name string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": name}}}
	}
	assert.Equal(t, map[string][]networkingv1.NetworkPolicyPeer{
		"telemetry": {ns("monitoring")},
		"console": {ns("monitoring"), {PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"otelcol-gpu.io/console-client": "true"}}},
			{PodSelector: &metav1.LabelSelector{MatchLabels: sts.Spec.Selector.MatchLabels}}},
	}, byPort, "only telemetry and the console, from the configured peers and (forwarding) the other gateways")
	for name := range byPort {
		assert.True(t, slices.ContainsFunc(gw.Ports, func(p corev1.ContainerPort) bool { return p.Name == name }), "port %s is the gateway's", name)
	}

	// A standby forwards controls to the owner over TLS verified against
	// the CA of the console's Secret (its ca.crt), so the console's Service
	// reaches any replica: ClusterIP, no affinity.
	fwd, ok := path(cfg, "extensions", "faultconsole", "forward").(map[string]any)
	require.True(t, ok, "extensions::faultconsole has no forward")
	assert.Equal(t, true, fwd["enabled"])
	assert.Equal(t, "40s", fwd["timeout"])
	assert.Equal(t, "/etc/otelcol-gpu/console-ca/ca.crt", path(fwd, "tls", "ca_file"))
	assert.NotContains(t, fwd["tls"], "insecure_skip_verify")
	m = slices.IndexFunc(gw.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/otelcol-gpu/console-ca" })
	require.GreaterOrEqual(t, m, 0, "the CA is not mounted")
	assert.True(t, gw.VolumeMounts[m].ReadOnly)
	v = slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == gw.VolumeMounts[m].Name })
	require.GreaterOrEqual(t, v, 0)
	assert.Equal(t, "otelcol-gpu-console-tls", pod.Volumes[v].Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}, pod.Volumes[v].Secret.Items)
	svc := typed[corev1.Service](t, objs, "Service", "otelcol-gpu-gateway-console")
	assert.Empty(t, svc.Spec.ClusterIP, "ClusterIP, allocated: any replica answers")
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	assert.Empty(t, svc.Spec.SessionAffinity)
	assert.Equal(t, "https", *svc.Spec.Ports[0].AppProtocol)
	assert.Equal(t, sts.Spec.Selector.MatchLabels, svc.Spec.Selector, "every gateway replica")

	// Without the console the policy admits telemetry only.
	objs = helmTemplate(t, scenarioByName(t, productionScenario))
	np = typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "otelcol-gpu-gateway")
	require.Len(t, np.Spec.Ingress, 1)
	assert.Equal(t, "telemetry", np.Spec.Ingress[0].Ports[0].Port.String())
	// Off, none.
	objs = helmTemplate(t, scenarioByName(t, productionScenario), "--set", "gateway.networkPolicy.enabled=false")
	assert.False(t, slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "NetworkPolicy" && o.GetName() == "otelcol-gpu-gateway"
	}))
}

// Forwarding off: a standby refuses controls naming the owner, so the
// console's Service is headless (otelcol-gpu-ctl --all-addresses finds the
// owner) and the gateways do not reach each other's console. The CA may
// come from another Secret. The small-cluster central (one replica acting
// alone) never forwards.
func TestChartConsoleForward(t *testing.T) {
	objs := helmTemplate(t, productionConsole, "--set", "gateway.console.forward.enabled=false")
	sts, gw := gatewayContainer(t, objs)
	cfg := gatewayConfig(t, objs, gw)
	assert.Nil(t, path(cfg, "extensions", "faultconsole", "forward"), "forward off")
	assert.False(t, slices.ContainsFunc(gw.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "console-forward-ca" }))
	svc := typed[corev1.Service](t, objs, "Service", "otelcol-gpu-gateway-console")
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless: the name resolves to every replica")
	assert.Empty(t, svc.Spec.SessionAffinity)
	np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "otelcol-gpu-gateway")
	for _, rule := range np.Spec.Ingress {
		for _, from := range rule.From {
			if from.PodSelector != nil {
				assert.NotEqual(t, sts.Spec.Selector.MatchLabels, from.PodSelector.MatchLabels, "no gateway-to-gateway rule without forwarding")
			}
		}
	}

	objs = helmTemplate(t, productionConsole, "--set", "gateway.console.forward.caSecret.name=ops-ca",
		"--set", "gateway.console.forward.caSecret.key=root.pem", "--set", "gateway.console.forward.timeout=20s")
	sts, gw = gatewayContainer(t, objs)
	v := slices.IndexFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "console-forward-ca" })
	require.GreaterOrEqual(t, v, 0)
	assert.Equal(t, "ops-ca", sts.Spec.Template.Spec.Volumes[v].Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "root.pem", Path: "ca.crt"}}, sts.Spec.Template.Spec.Volumes[v].Secret.Items)
	assert.Equal(t, "20s", path(gatewayConfig(t, objs, gw), "extensions", "faultconsole", "forward", "timeout"))

	objs = helmTemplate(t, scenarioByName(t, smallClusterConsoleScenario))
	_, gw = gatewayContainer(t, objs)
	assert.Nil(t, path(gatewayConfig(t, objs, gw), "extensions", "faultconsole", "forward"), "the small-cluster central never forwards")
	assert.False(t, slices.ContainsFunc(gw.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "console-forward-ca" }))

	var stderr bytes.Buffer
	args := append([]string{"template", releaseName, chartDir, "--namespace", releaseNamespace}, productionConsole.valuesArgs()...)
	cmd := exec.Command(helmBin(t), append(args, "--set", "gateway.console.forward.timeout=forever")...)
	cmd.Stderr = &stderr
	_, err := cmd.Output()
	require.Error(t, err)
	assert.Contains(t, stderr.String(), "gateway.console.forward.timeout: forever is not a duration such as 40s")
}

// cert-manager issues the certificate when asked, for the names the
// replicas are reached by; bindPodIP listens on the pod's address.
func TestChartConsoleCertManagerAndPodIP(t *testing.T) {
	objs := helmTemplate(t, productionConsole, "--set", "gateway.console.tls.secret=",
		"--set", "gateway.console.tls.certManager.enabled=true", "--set", "gateway.console.tls.certManager.issuerRef.name=ops-ca",
		"--set", "gateway.console.bindPodIP=true")
	var cert *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Certificate" {
			cert = o
		}
	}
	require.NotNil(t, cert, "no cert-manager Certificate")
	assert.Equal(t, "cert-manager.io/v1", cert.GetAPIVersion())
	spec := cert.Object["spec"].(map[string]any)
	assert.Equal(t, "otelcol-gpu-gateway-console-tls", spec["secretName"])
	assert.ElementsMatch(t, []any{"otelcol-gpu-gateway-console.otelcol-gpu.svc", "otelcol-gpu-gateway.otelcol-gpu.svc",
		"*.otelcol-gpu-gateway.otelcol-gpu.svc", "localhost"}, spec["dnsNames"])
	assert.Equal(t, map[string]any{"name": "ops-ca", "kind": "Issuer", "group": "cert-manager.io"}, spec["issuerRef"])
	sts, gw := gatewayContainer(t, objs)
	v := slices.IndexFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "console-tls" })
	require.GreaterOrEqual(t, v, 0)
	assert.Equal(t, "otelcol-gpu-gateway-console-tls", sts.Spec.Template.Spec.Volumes[v].Secret.SecretName)

	cfg := gatewayConfig(t, objs, gw)
	assert.Equal(t, "[$(POD_IP)]:8787", resolve(gw, path(cfg, "extensions", "faultconsole", "endpoint").(string)))
	ip := envVar(gw, "POD_IP")
	require.NotNil(t, ip)
	assert.Equal(t, "status.podIP", ip.ValueFrom.FieldRef.FieldPath)
	assert.Empty(t, plainEverywhere(gw, cfg))
}

// The render fails naming the value when the console has no certificate,
// or two.
func TestChartConsoleTLSRefusals(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"gateway.console.tls.secret="}, "gateway.console.tls: the console serves HTTPS only"},
		{[]string{"gateway.console.tls.certManager.enabled=true"}, "gateway.console.tls: set secret or certManager.enabled, not both"},
		{[]string{"gateway.console.tls.secret=", "gateway.console.tls.certManager.enabled=true"}, "gateway.console.tls.certManager.issuerRef.name: name the cert-manager Issuer"},
	} {
		args := []string{"template", releaseName, chartDir, "--namespace", releaseNamespace}
		args = append(args, productionConsole.valuesArgs()...)
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(helmBin(t), args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.Error(t, err, "rendered:\n%.1000s", out)
		assert.Contains(t, stderr.String(), tc.want)
	}
}
