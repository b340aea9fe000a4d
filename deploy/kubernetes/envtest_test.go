//go:build envtest

// Renders the Helm chart (deploy/helm/otelcol-gpu) with every values file of
// its ci/ folder through the helm CLI and dry-runs each object
// (dryRun=All, strict field validation) against a real kube-apiserver and
// etcd (controller-runtime's envtest) with the prometheus-operator CRDs
// (testdata/prometheus-operator-crds); the dev Kafka (dev-kafka) is
// rendered with the kustomize CLI. Needs:
//
//	make envtest-bin tools
//	go test -tags envtest -run 'TestEnvtestChart|TestHelmInstall' -v ./deploy/kubernetes/
package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/internal/gomemlimit"
)

// strimziGroup: Strimzi's CRDs are not installed in the test API server;
// strimzi_test.go checks those objects against the collector configs.
const strimziGroup = "kafka.strimzi.io"

// startAPIServer starts kube-apiserver and etcd from .tools/envtest-bin (or
// $ENVTEST_BIN_DIR), as exporter/remediationexporter's envtest tests do.
// Missing binaries fail: a skip would let `make platform-test` pass without
// an API server.
func startAPIServer(t *testing.T) (*rest.Config, *envtest.Environment) {
	t.Helper()
	dir := os.Getenv("ENVTEST_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot, ".tools", "envtest-bin")
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
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		UseExistingCluster:    &useExisting,
		// ServiceMonitor and PrometheusRule (the chart's serviceMonitor
		// and prometheusRule values).
		CRDDirectoryPaths:     []string{filepath.Join("testdata", "prometheus-operator-crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	require.NoError(t, err, "start kube-apiserver and etcd")
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })
	return cfg, env
}

// kustomizeBuild renders dir with the kustomize CLI ($KUSTOMIZE, else
// .tools/bin/kustomize): the dev Kafka (dev-kafka), a variant of the
// Strimzi example.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin := os.Getenv("KUSTOMIZE")
	if bin == "" {
		bin = filepath.Join(repoRoot, ".tools", "bin", "kustomize")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kustomize missing at %s: GOBIN=$PWD/.tools/bin go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2", bin)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "build", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kustomize build %s: %s", dir, stderr.String())

	objs := decodeObjects(t, out)
	require.NotEmpty(t, objs)
	return objs
}

type apiClient struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newAPIClient(t *testing.T, cfg *rest.Config) *apiClient {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return &apiClient{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (c *apiClient) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

// TestEnvtestChart: the chart renders with each values file of ci/ (and
// its defaults), and the API server accepts every object of it (server-side
// dry run after the namespaces were created for real); the assertions on
// what the objects say follow. dev is installed with the dev Kafka of
// dev-kafka beside it.
func TestEnvtestChart(t *testing.T) {
	cfg, _ := startAPIServer(t)
	c := newAPIClient(t, cfg)
	ctx := context.Background()
	for _, s := range scenarios {
		overlay := s.name
		t.Run(overlay, func(t *testing.T) {
			var extra []string
			if overlay == defaultScenario {
				// The Namespace template too (namespace.create).
				extra = []string{"--set", "namespace.create=true"}
			}
			objs := helmTemplate(t, s, extra...)
			if overlay == devScenario {
				objs = append(objs, kustomizeBuild(t, "dev-kafka")...)
			}

			// Namespaces for real: a dry-run namespace does not exist for
			// the dry runs of the objects inside it. The chart renders its
			// own only with namespace.create (helm install
			// --create-namespace makes it otherwise).
			release := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": releaseNamespace},
			}}
			for _, obj := range append([]*unstructured.Unstructured{release}, objs...) {
				if obj.GetKind() != "Namespace" {
					continue
				}
				res, err := c.resource(obj)
				require.NoError(t, err)
				_, err = res.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
				if !apierrors.IsAlreadyExists(err) {
					require.NoError(t, err, "namespace %s", obj.GetName())
				}
			}
			var noCRD []string
			dryRun := 0
			for _, obj := range objs {
				id := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
				res, err := c.resource(obj)
				if meta.IsNoMatchError(err) {
					require.Equal(t, strimziGroup, obj.GroupVersionKind().Group, "%s: the API server does not know this kind", id)
					noCRD = append(noCRD, obj.GetKind())
					continue
				}
				require.NoError(t, err, id)
				if obj.GetKind() == "Namespace" {
					continue
				}
				_, err = res.Create(ctx, obj, metav1.CreateOptions{
					DryRun:          []string{metav1.DryRunAll},
					FieldValidation: metav1.FieldValidationStrict,
				})
				if assert.NoError(t, err, "dry run of %s", id) {
					dryRun++
				}
			}
			t.Logf("%s: %d objects rendered, %d dry-run by the API server, %d without a CRD here (Strimzi)", overlay, len(objs), dryRun, len(noCRD))
			if overlay == devScenario {
				// The single-node Kafka is part of dev only.
				assert.ElementsMatch(t, []string{"Kafka", "KafkaNodePool", "KafkaTopic", "KafkaTopic", "KafkaTopic", "KafkaTopic", "KafkaTopic"}, noCRD)
				checkDevKafka(t, objs)
			} else {
				assert.Empty(t, noCRD)
			}
			for _, o := range objs {
				if o.GetKind() != "Namespace" && o.GroupVersionKind().Group != strimziGroup {
					assert.Equal(t, "otelcol-gpu", o.GetLabels()["app.kubernetes.io/part-of"], "%s %s: label app.kubernetes.io/part-of", o.GetKind(), o.GetName())
				}
			}
			checkScenario(t, objs, overlay)
			if overlay == defaultScenario {
				ns := typed[corev1.Namespace](t, objs, "Namespace", releaseNamespace)
				assert.Equal(t, "privileged", ns.Labels["pod-security.kubernetes.io/enforce"], "hostPath volumes and CAP_SYSLOG")
				assert.Equal(t, "baseline", ns.Labels["pod-security.kubernetes.io/warn"])
			}
		})
	}
}

func checkAgent(t *testing.T, objs []*unstructured.Unstructured, overlay string) {
	ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent")
	pod := ds.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	agent := pod.Containers[0]
	// The image the chart's appVersion names (VERSION, TestChartVersion).
	assert.Equal(t, "ghcr.io/otelcol-gpu/otelcol-gpu-agent:"+chartAppVersion(t), agent.Image)

	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		sc := c.SecurityContext
		require.NotNil(t, sc, c.Name)
		assert.False(t, sc.Privileged != nil && *sc.Privileged, "%s: privileged", c.Name)
		assert.False(t, sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation, "%s: privilege escalation", c.Name)
		assert.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: writable root", c.Name)
		require.NotNil(t, sc.Capabilities, c.Name)
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, c.Name)
	}
	assert.Equal(t, []corev1.Capability{"SYSLOG"}, agent.SecurityContext.Capabilities.Add, "only CAP_SYSLOG, for /dev/kmsg")
	assert.False(t, pod.HostNetwork || pod.HostPID || pod.HostIPC)

	// host path -> the container's mount of it.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range agent.VolumeMounts {
		if v := volumes[m.Name]; v.HostPath != nil {
			mounts[v.HostPath.Path] = m
		}
	}
	for path, readOnly := range map[string]bool{
		"/sys":                           true,
		"/dev/kmsg":                      true,
		"/var/lib/kubelet/pod-resources": true,
		"/var/run/torch-fr":              true,
		"/var/run/nccl-inspector":        true,
		"/var/lib/otelcol-gpu/agent":     false,
	} {
		m, ok := mounts[path]
		if assert.True(t, ok, "no hostPath mount of %s", path) {
			assert.Equal(t, readOnly, m.ReadOnly, "%s read-only", path)
		}
	}
	assert.Equal(t, corev1.HostPathCharDev, *volumes[mounts["/dev/kmsg"].Name].HostPath.Type)
	assert.Equal(t, mounts["/sys"].MountPath, envVar(agent, "SYSFS_ROOT").Value, "SYSFS_ROOT is the host's /sys")
	assert.Equal(t, mounts["/var/lib/otelcol-gpu/agent"].MountPath, envVar(agent, "OTELCOL_GPU_STORAGE_DIR").Value, "queue and offsets on the host")
	assert.Equal(t, mounts["/var/run/torch-fr"].MountPath, envVar(agent, "NCCL_FR_DIR").Value)
	assert.Equal(t, mounts["/var/run/nccl-inspector"].MountPath, envVar(agent, "NCCL_INSPECTOR_DIR").Value)
	assert.Equal(t, "/var/lib/kubelet/pod-resources", mounts["/var/lib/kubelet/pod-resources"].MountPath, "the dcgm receiver's default socket path")

	host := envVar(agent, "OTELCOL_GPU_HOST_NAME")
	require.NotNil(t, host)
	require.NotNil(t, host.ValueFrom)
	assert.Equal(t, "spec.nodeName", host.ValueFrom.FieldRef.FieldPath)
	endpoints := []string{"KAFKA_BROKERS", "DCGM_ENDPOINT"}
	if isSmallCluster(overlay) {
		// No Kafka: the agents send to the central gateway.
		assert.Nil(t, envVar(agent, "KAFKA_BROKERS"), "small cluster: KAFKA_BROKERS")
		endpoints = []string{"DCGM_ENDPOINT"}
	}
	for _, name := range endpoints {
		e := envVar(agent, name)
		if assert.NotNil(t, e, name) && assert.NotNil(t, e.ValueFrom, name) {
			assert.Equal(t, "otelcol-gpu-endpoints", e.ValueFrom.ConfigMapKeyRef.Name, name)
		}
	}
	checkProbes(t, agent, "OTELCOL_GPU_HEALTH_ENDPOINT")

	assert.Equal(t, "true", pod.NodeSelector["nvidia.com/gpu.present"])
	assert.True(t, slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "nvidia.com/gpu" && tol.Operator == corev1.TolerationOpExists
	}), "tolerates nvidia.com/gpu taints")
	assert.True(t, slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "otelcol-gpu.io/gpu-fault" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
	}), "keeps reporting on a node remediation quarantined, whatever the taint effect")

	lim := agent.Resources.Limits[corev1.ResourceMemory]
	req := agent.Resources.Requests
	if !isProduction(overlay) {
		assert.Equal(t, "256Mi", lim.String())
		assert.Equal(t, "100m", req.Cpu().String())
		assert.Equal(t, "128Mi", req.Memory().String())
	} else {
		assert.Equal(t, "512Mi", lim.String())
	}
	checkConfigVolume(t, objs, ds.Spec.Template, "agent")
	checkKafkaSecurity(t, objs, pod, agent, "agent", overlay)
	checkGoRuntime(t, objs, pod, agent)
	checkAgentOTLPNodeLocal(t, objs, ds)
	checkAgentNetworkPolicy(t, objs, ds)
	checkOTLPAuth(t, objs, pod, agent, overlay)

	svc := typed[corev1.Service](t, objs, "Service", "otelcol-gpu-agent-metrics")
	assert.Equal(t, "true", svc.Annotations["prometheus.io/scrape"])
	assert.Equal(t, "8888", svc.Annotations["prometheus.io/port"])
	assert.Equal(t, "8888", envVar(agent, "OTELCOL_GPU_TELEMETRY_PORT").Value)
	assert.Equal(t, "0.0.0.0", envVar(agent, "OTELCOL_GPU_TELEMETRY_HOST").Value)
}

// checkProbes: the health_check extension listens beyond loopback, on the
// port the probes ask.
func checkProbes(t *testing.T, c corev1.Container, env string) {
	t.Helper()
	endpoint := envVar(c, env)
	require.NotNil(t, endpoint, env)
	host, port, ok := strings.Cut(endpoint.Value, ":")
	require.True(t, ok)
	assert.Equal(t, "0.0.0.0", host, "health_check bound for the kubelet")
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		require.NotNil(t, p, c.Name)
		require.NotNil(t, p.HTTPGet)
		named := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.HTTPGet.Port.String() })
		require.GreaterOrEqual(t, named, 0, "probe port %s", p.HTTPGet.Port.String())
		assert.Equal(t, port, strconv.Itoa(int(c.Ports[named].ContainerPort)), "probe port = health_check port")
	}
}

// checkConfigVolume: the pod mounts the chart's config ConfigMap, whose
// config.yaml is the distribution's config, and a checksum of the configs
// in its template rolls the pods when they change (kustomize did it with a
// hash suffix on the ConfigMap's name).
func checkConfigVolume(t *testing.T, objs []*unstructured.Unstructured, tmpl corev1.PodTemplateSpec, distribution string) {
	t.Helper()
	pod := tmpl.Spec
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "config" })
	require.GreaterOrEqual(t, i, 0)
	name := pod.Volumes[i].ConfigMap.Name
	assert.Equal(t, "otelcol-gpu-"+distribution+"-config", name)
	assert.Regexp(t, `^[0-9a-f]{64}$`, tmpl.Annotations["checksum/config"], "%s: the configs' checksum in the pod template", distribution)
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", name)
	want, err := os.ReadFile(filepath.Join(repoRoot, "distributions", distribution, "config.yaml"))
	require.NoError(t, err)
	if cm.Data["config.yaml"] != string(want) {
		t.Errorf("ConfigMap %s is not distributions/%s/config.yaml: run deploy/helm/sync.sh", name, distribution)
	}
}

func checkGateway(t *testing.T, objs []*unstructured.Unstructured, overlay string) {
	sts := typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway")
	pod := sts.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	gw := pod.Containers[0]

	id := envVar(gw, "KAFKA_GROUP_INSTANCE_ID")
	require.NotNil(t, id, "KAFKA_GROUP_INSTANCE_ID")
	require.NotNil(t, id.ValueFrom)
	require.NotNil(t, id.ValueFrom.FieldRef)
	assert.Equal(t, "metadata.name", id.ValueFrom.FieldRef.FieldPath, "static membership id = pod name")

	headless := typed[corev1.Service](t, objs, "Service", sts.Spec.ServiceName)
	assert.Equal(t, corev1.ClusterIPNone, headless.Spec.ClusterIP)
	typed[corev1.ServiceAccount](t, objs, "ServiceAccount", pod.ServiceAccountName)
	assert.Equal(t, "otelcol-gpu-gateway", pod.ServiceAccountName, "deploy/rbac's subject")

	endpoints := []string{"KAFKA_BROKERS", "PROMETHEUS_REMOTE_WRITE_URL", "LOKI_OTLP_ENDPOINT", "TEMPO_OTLP_ENDPOINT"}
	if isSmallCluster(overlay) {
		assert.Nil(t, envVar(gw, "KAFKA_BROKERS"), "small cluster: KAFKA_BROKERS")
		endpoints = endpoints[1:]
	}
	for _, name := range endpoints {
		e := envVar(gw, name)
		if assert.NotNil(t, e, name) && assert.NotNil(t, e.ValueFrom, name) {
			assert.Equal(t, "otelcol-gpu-endpoints", e.ValueFrom.ConfigMapKeyRef.Name, name)
		}
	}
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-endpoints")
	assert.NotEmpty(t, cm.Data["KAFKA_BROKERS"])

	sc := gw.SecurityContext
	require.NotNil(t, sc)
	assert.False(t, sc.Privileged != nil && *sc.Privileged)
	assert.True(t, pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
	assert.Empty(t, sc.Capabilities.Add)
	checkProbes(t, gw, "OTELCOL_GPU_HEALTH_ENDPOINT")
	checkConfigVolume(t, objs, sts.Spec.Template, "gateway")
	checkKafkaSecurity(t, objs, pod, gw, "gateway", overlay)
	checkGoRuntime(t, objs, pod, gw)

	pdb := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "otelcol-gpu-gateway")
	assert.Equal(t, "1", pdb.Spec.MaxUnavailable.String())
	assert.Equal(t, sts.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)
	require.NotNil(t, pod.Affinity)
	require.NotNil(t, pod.Affinity.PodAntiAffinity)

	dryRun := envVar(gw, "REMEDIATION_DRY_RUN")
	require.NotNil(t, dryRun)
	switch overlay {
	case devScenario, defaultScenario, smallClusterScenario, dcgmExporterDropInScenario, consoleScenario, smallClusterConsoleScenario:
		replicas := 1
		if overlay == defaultScenario || overlay == dcgmExporterDropInScenario || overlay == consoleScenario {
			replicas = 3 // the defaults' gateway
		}
		assert.EqualValues(t, replicas, *sts.Spec.Replicas)
		assert.Equal(t, "true", dryRun.Value)
		want := []string{"--config=/etc/otelcol-gpu/config.yaml"}
		if isSmallCluster(overlay) {
			want = append(want, "--config=/etc/otelcol-gpu/"+smallClusterFragment)
		}
		// The console's fragment last (chart_console_test.go checks it).
		switch overlay {
		case consoleScenario:
			want = append(want, "--config=/etc/otelcol-gpu/console.yaml", "--config=/etc/otelcol-gpu/console-tls.yaml")
		case smallClusterConsoleScenario:
			want = append(want, "--config=/etc/otelcol-gpu/small-cluster-console.yaml", "--config=/etc/otelcol-gpu/console-tls.yaml")
		}
		assert.Equal(t, want, gw.Args)
	default:
		assert.EqualValues(t, 3, *sts.Spec.Replicas)
		assert.Equal(t, "false", dryRun.Value)
		assert.NotEmpty(t, pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "one gateway per node")
		// The shipped config, the Kubernetes platform's config merged over
		// it (from the chart's ConfigMap; its content: remediation_test.go),
		// and Kafka TLS/SASL (checkKafkaSecurity).
		require.Len(t, gw.Args, 3)
		assert.Equal(t, "--config=/etc/otelcol-gpu/config.yaml", gw.Args[0])
		var fragment struct {
			Exporters struct {
				Remediation struct {
					Kubernetes struct {
						Enabled bool `json:"enabled"`
					} `json:"kubernetes"`
				} `json:"remediation"`
			} `json:"exporters"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(mountedConfigMapFile(t, objs, pod, gw, strings.TrimPrefix(gw.Args[1], "--config="))), &fragment))
		assert.True(t, fragment.Exporters.Remediation.Kubernetes.Enabled, "%s: the Kubernetes platform", gw.Args[1])
		// The audit file outlives the pod: a restarted gateway replays it.
		audit := envVar(gw, "REMEDIATION_AUDIT_FILE")
		require.NotNil(t, audit)
		m := slices.IndexFunc(gw.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(audit.Value, m.MountPath+"/") })
		require.GreaterOrEqual(t, m, 0, "%s is not mounted", audit.Value)
		name := gw.VolumeMounts[m].Name
		assert.False(t, slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == name }),
			"volume %s of %s is a pod volume (it goes with the pod)", name, audit.Value)
		assert.True(t, slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(c corev1.PersistentVolumeClaim) bool { return c.Name == name }),
			"volume %s of %s is a volumeClaimTemplate", name, audit.Value)
	}
}

// checkGoRuntime: GOMAXPROCS follows the CPU request, and GOMEMLIMIT lets
// the garbage collector run before the memory_limiter of c's config
// (--config, the first) counts garbage as load, without making it collect
// far more often than it must.
func checkGoRuntime(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	procs := envVar(c, "GOMAXPROCS")
	if assert.NotNil(t, procs, "%s: GOMAXPROCS", c.Name) && assert.NotNil(t, procs.ValueFrom, "%s: GOMAXPROCS", c.Name) &&
		assert.NotNil(t, procs.ValueFrom.ResourceFieldRef, "%s: GOMAXPROCS", c.Name) {
		ref := procs.ValueFrom.ResourceFieldRef
		assert.Equal(t, "requests.cpu", ref.Resource, "%s: GOMAXPROCS", c.Name)
		assert.Equal(t, "1", ref.Divisor.String(), "%s: GOMAXPROCS in whole cores", c.Name)
		assert.False(t, c.Resources.Requests.Cpu().IsZero(), "%s: no CPU request", c.Name)
	}

	memLimit := envVar(c, "GOMEMLIMIT")
	require.NotNil(t, memLimit, "%s: GOMEMLIMIT", c.Name)
	goMemLimit, err := gomemlimit.Parse(memLimit.Value)
	require.NoError(t, err, c.Name)
	require.True(t, strings.HasPrefix(c.Args[0], "--config="), c.Args[0])
	config := mountedConfigMapFile(t, objs, pod, c, strings.TrimPrefix(c.Args[0], "--config="))
	assert.NoError(t, gomemlimit.CheckConfig(goMemLimit, c.Resources.Limits.Memory().Value(), []byte(config)),
		"%s: limit %s", c.Name, c.Resources.Limits.Memory())
}

// mountedVolume is the volume mounted in c at the directory of path, and
// the file's name relative to that mount.
func mountedVolume(t *testing.T, pod corev1.PodSpec, c corev1.Container, path string) (corev1.Volume, string) {
	t.Helper()
	m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(path, m.MountPath+"/") })
	require.GreaterOrEqual(t, m, 0, "%s: %s is not mounted", c.Name, path)
	v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[m].Name })
	require.GreaterOrEqual(t, v, 0, "%s: no volume %s", c.Name, c.VolumeMounts[m].Name)
	return pod.Volumes[v], strings.TrimPrefix(path, c.VolumeMounts[m].MountPath+"/")
}

// mountedConfigMapFile is the content of the file at path in c, which must
// come from a rendered ConfigMap.
func mountedConfigMapFile(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, c corev1.Container, path string) string {
	t.Helper()
	v, key := mountedVolume(t, pod, c, path)
	require.NotNil(t, v.ConfigMap, "%s: %s is not from a ConfigMap", c.Name, path)
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", v.ConfigMap.Name)
	data, ok := cm.Data[key]
	require.True(t, ok, "ConfigMap %s has no key %s", cm.Name, key)
	return data
}

// consoleTLSSecret is ci/console-values.yaml's certificate (with the CA a
// standby verifies the owner by), a Secret the user creates.
const consoleTLSSecret = "otelcol-gpu-console-tls"

// kafkaTLSSASLFragment is the file name of distributions/*/kafka-tls-sasl.yaml.
const kafkaTLSSASLFragment = "kafka-tls-sasl.yaml"

// checkKafkaSecurity: production merges distributions/<distribution>/
// kafka-tls-sasl.yaml over the shipped config and connects to the Strimzi
// example's TLS listener as the distribution's KafkaUser, with the
// password and cluster CA from Strimzi's Secrets (mirrored, documented in
// deploy/README.md); dev talks to its unauthenticated Kafka in plain text.
func checkKafkaSecurity(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, c corev1.Container, distribution, overlay string) {
	t.Helper()
	brokers := typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-endpoints").Data["KAFKA_BROKERS"]
	if isSmallCluster(overlay) {
		// No Kafka at all.
		for _, arg := range c.Args {
			assert.NotContains(t, arg, kafkaTLSSASLFragment, "%s: small cluster has no Kafka", c.Name)
		}
		for _, name := range []string{"KAFKA_BROKERS", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SASL_MECHANISM", "KAFKA_TLS_CA_FILE"} {
			assert.Nil(t, envVar(c, name), "%s: %s in small cluster", c.Name, name)
		}
		checkSmallCluster(t, objs, pod, c, distribution)
		return
	}
	if !isProduction(overlay) {
		for _, arg := range c.Args {
			assert.NotContains(t, arg, kafkaTLSSASLFragment, "%s: dev Kafka has no authentication", c.Name)
		}
		for _, name := range []string{"KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SASL_MECHANISM", "KAFKA_TLS_CA_FILE"} {
			assert.Nil(t, envVar(c, name), "%s: %s in dev", c.Name, name)
		}
		if overlay != devScenario {
			return
		}
		// The rendered dev Kafka: the bootstrap's listener has no
		// authentication and no TLS.
		i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Kafka" })
		require.GreaterOrEqual(t, i, 0, "dev renders its Kafka")
		// Not typed: kafkaCluster holds only the fields read here.
		var kafka kafkaCluster
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[i].Object, &kafka))
		l := slices.IndexFunc(kafka.Spec.Kafka.Listeners, func(l kafkaListener) bool { return kafka.bootstrap(l) == brokers })
		require.GreaterOrEqual(t, l, 0, "dev KAFKA_BROKERS %s is no listener of the dev Kafka", brokers)
		assert.Nil(t, kafka.Spec.Kafka.Listeners[l].Authentication)
		assert.False(t, kafka.Spec.Kafka.Listeners[l].TLS)
		return
	}

	// The fragment, from the config ConfigMap, as a further --config.
	i := slices.IndexFunc(c.Args, func(arg string) bool {
		return strings.HasPrefix(arg, "--config=") && strings.HasSuffix(arg, "/"+kafkaTLSSASLFragment)
	})
	require.GreaterOrEqual(t, i, 0, "%s: no --config=.../%s in %v", c.Name, kafkaTLSSASLFragment, c.Args)
	assert.Equal(t, "--config=/etc/otelcol-gpu/config.yaml", c.Args[0], "%s: the shipped config first", c.Name)
	want, err := os.ReadFile(filepath.Join(repoRoot, "distributions", distribution, kafkaTLSSASLFragment))
	require.NoError(t, err)
	assert.Equal(t, string(want), mountedConfigMapFile(t, objs, pod, c, strings.TrimPrefix(c.Args[i], "--config=")),
		"%s: not distributions/%s/%s (run deploy/helm/sync.sh)", c.Name, distribution, kafkaTLSSASLFragment)

	// The distribution's KafkaUser and the password Strimzi generated for it.
	users := readStrimziUsers(t)
	user := "otelcol-gpu-" + distribution
	require.Contains(t, users, user, "deploy/kafka/strimzi/users.yaml")
	username := envVar(c, "KAFKA_SASL_USERNAME")
	if assert.NotNil(t, username, "%s: KAFKA_SASL_USERNAME", c.Name) {
		assert.Equal(t, user, username.Value)
	}
	password := envVar(c, "KAFKA_SASL_PASSWORD")
	if assert.NotNil(t, password, "%s: KAFKA_SASL_PASSWORD", c.Name) &&
		assert.NotNil(t, password.ValueFrom, c.Name) && assert.NotNil(t, password.ValueFrom.SecretKeyRef, c.Name) {
		ref := password.ValueFrom.SecretKeyRef
		assert.Equal(t, user, ref.Name, "the User Operator's Secret is named after the user")
		assert.Equal(t, "password", ref.Key)
		assert.False(t, ref.Optional != nil && *ref.Optional, "%s: without the password the pod must not start", c.Name)
	}
	if mechanism := envVar(c, "KAFKA_SASL_MECHANISM"); mechanism != nil {
		assert.Equal(t, strings.ToUpper(users[user].Spec.Authentication.Type), mechanism.Value)
	}

	// The cluster CA, from Strimzi's Secret, for the TLS listener.
	kafka := readStrimziKafka(t)
	caFile := envVar(c, "KAFKA_TLS_CA_FILE")
	if assert.NotNil(t, caFile, "%s: KAFKA_TLS_CA_FILE", c.Name) {
		v, file := mountedVolume(t, pod, c, caFile.Value)
		require.NotNil(t, v.Secret, "%s: %s is not from a Secret", c.Name, caFile.Value)
		assert.Equal(t, kafka.clusterCASecret(), v.Secret.SecretName)
		key := file
		for _, item := range v.Secret.Items {
			if item.Path == file {
				key = item.Key
			}
		}
		assert.Equal(t, "ca.crt", key, "%s: %s is not the CA certificate", c.Name, caFile.Value)
	}
	assert.Equal(t, kafka.bootstrap(kafka.scramTLSListener(t)), brokers, "production KAFKA_BROKERS: the TLS listener with scram-sha-512")

	checkSecretsResolvable(t, objs, pod, externalSecrets(t))
}

// externalSecrets: Secrets the production pods may reference without the
// chart rendering them, each documented in deploy/README.md: the
// KafkaUsers' passwords and the Kafka cluster CA, which Strimzi creates in
// namespace kafka and which are mirrored into otelcol-gpu, the optional
// remediation webhook, the agents' OTLP token (agent.otlp.auth) and the
// fault console's token (gateway.console.tokenSecret of ci/console-values.yaml).
func externalSecrets(t *testing.T) []string {
	t.Helper()
	names := []string{readStrimziKafka(t).clusterCASecret(), "otelcol-gpu-remediation", otlpTokenSecret, consoleTokenSecret, consoleTLSSecret}
	for name := range readStrimziUsers(t) {
		names = append(names, name)
	}
	return names
}

// checkSecretsResolvable: every Secret the pod references is rendered, or
// an external one with a row in deploy/README.md's table of Secrets.
func checkSecretsResolvable(t *testing.T, objs []*unstructured.Unstructured, pod corev1.PodSpec, external []string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	var refs []string
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			refs = append(refs, v.Secret.SecretName)
		}
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				refs = append(refs, e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				refs = append(refs, e.SecretRef.Name)
			}
		}
	}
	require.NotEmpty(t, refs)
	for _, name := range refs {
		rendered := slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "Secret" && o.GetName() == name
		})
		if rendered {
			continue
		}
		if assert.Contains(t, external, name, "Secret %s is neither rendered nor a documented external one", name) {
			// A row of the README's table of Secrets you create.
			assert.True(t, strings.Contains(string(readme), "\n| `"+name+"` |"), "deploy/README.md has no table row for Secret %s", name)
		}
	}
}

// isProduction: the production values, alone or with OTLP auth.
func isProduction(overlay string) bool {
	return overlay == productionScenario || overlay == otlpAuthOverlay
}

// isSmallCluster: the small-cluster values, alone or with the console.
func isSmallCluster(overlay string) bool {
	return overlay == smallClusterScenario || overlay == smallClusterConsoleScenario
}

// checkDevKafka: the dev Kafka (dev-kafka) is one node, so every topic has
// one replica (the topics themselves are checked in strimzi_test.go).
func checkDevKafka(t *testing.T, objs []*unstructured.Unstructured) {
	for _, o := range objs {
		switch o.GetKind() {
		case "KafkaTopic":
			replicas, _, err := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
			require.NoError(t, err)
			assert.EqualValues(t, 1, replicas, o.GetName())
			isr, _, err := unstructured.NestedFieldNoCopy(o.Object, "spec", "config", "min.insync.replicas")
			require.NoError(t, err)
			assert.EqualValues(t, 1, isr, o.GetName())
		case "KafkaNodePool":
			replicas, _, err := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
			require.NoError(t, err)
			assert.EqualValues(t, 1, replicas)
		case "KafkaUser":
			t.Errorf("dev Kafka has no authentication: KafkaUser %s must not be rendered", o.GetName())
		}
	}
}

// bootstrap is the in-cluster bootstrap address of listener l.
func (k kafkaCluster) bootstrap(l kafkaListener) string {
	return fmt.Sprintf("%s-kafka-bootstrap.%s.svc:%d", k.Metadata.Name, k.Metadata.Namespace, l.Port)
}
