package dcgmreceiver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels/fakeapi"
)

func podLabelsConfig(naming string) *Config {
	cfg := fastConfig()
	cfg.CollectionInterval = interval.Floor // validated below
	cfg.Naming = naming
	cfg.HostName = "xl003"
	cfg.Attribution.Kubernetes.Enabled = true
	cfg.Attribution.Kubernetes.PodLabels = true
	cfg.Attribution.Kubernetes.NodeName = "gpu-1"
	return cfg
}

// startWithPodLabels runs the receiver on a GPU owned by training/llama-0,
// the pod labels read through newClient; it returns the resource
// attributes of the last GPU series once want says they are complete.
func startWithPodLabels(t *testing.T, cfg *Config, newClient func() (*podlabels.Client, error), want func(pcommon.Map) bool) (pcommon.Map, *observer.ObservedLogs) {
	t.Helper()
	require.NoError(t, confmap.Validate(cfg))
	snap := snapshot(time.Now(), intValue(model.FieldGPUTemp, 61))
	snap.GPUs[0].Owner = model.Owner{PodName: "llama-0", Namespace: "training", Container: "pytorch"}
	core, logs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	labeler := newPodLabeler(cfg, set.Logger).(*clusterPodLabels)
	labeler.newClient = newClient
	r, err := newDCGMReceiver(cfg, set, dependencies{metricsSource: &fakeSource{snaps: []model.Snapshot{snap}}, podLabels: labeler})
	require.NoError(t, err)
	sink := new(consumertest.MetricsSink)
	r.nextMetrics = sink
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	var res pcommon.Map
	require.Eventually(t, func() bool {
		all := sink.AllMetrics()
		if len(all) == 0 {
			return false
		}
		res = all[len(all)-1].ResourceMetrics().At(0).Resource().Attributes()
		return want(res)
	}, 30*time.Second, 10*time.Millisecond)
	return res, logs
}

// fakeCluster is an API server with training/llama-0 on gpu-1.
func fakeCluster(t *testing.T) func() (*podlabels.Client, error) {
	srv := fakeapi.New(t, "")
	srv.Put(fakeapi.Pod{Namespace: "training", Name: "llama-0", Node: "gpu-1", Labels: map[string]string{
		"app.kubernetes.io/name": "llama",
		"team":                   "ml",
		"gpu":                    "taken", // dcgm-exporter's own label: left out
		"pod":                    "taken",
	}})
	return func() (*podlabels.Client, error) {
		return podlabels.NewClient(podlabels.Config{Host: srv.URL(), CAData: srv.CAPEM()})
	}
}

func TestPodLabelsUnderDCGMExporterNaming(t *testing.T) {
	res, _ := startWithPodLabels(t, podLabelsConfig(NamingDCGMExporter), fakeCluster(t), func(m pcommon.Map) bool {
		_, ok := m.Get("app_kubernetes_io_name")
		return ok
	})
	got := map[string]string{}
	for _, k := range []string{"app_kubernetes_io_name", "team", "gpu", "pod", "namespace", "container"} {
		if v, ok := res.Get(k); ok {
			got[k] = v.Str()
		}
	}
	assert.Equal(t, map[string]string{
		"app_kubernetes_io_name": "llama", "team": "ml",
		"gpu": "4", "pod": "llama-0", "namespace": "training", "container": "pytorch",
	}, got, "dcgm-exporter's names for the pod's labels; its own labels win")
}

func TestPodLabelsUnderOTelNaming(t *testing.T) {
	res, _ := startWithPodLabels(t, podLabelsConfig(NamingOTel), fakeCluster(t), func(m pcommon.Map) bool {
		_, ok := m.Get("k8s.pod.label.app.kubernetes.io/name")
		return ok
	})
	v, _ := res.Get("k8s.pod.label.team")
	assert.Equal(t, "ml", v.Str())
	v, _ = res.Get("k8s.pod.name")
	assert.Equal(t, "llama-0", v.Str())
}

// Outside a cluster: logged, and the series go out without pod labels.
func TestPodLabelsWithoutCluster(t *testing.T) {
	res, logs := startWithPodLabels(t, podLabelsConfig(NamingDCGMExporter),
		func() (*podlabels.Client, error) { return nil, errors.New("no service account token") },
		func(m pcommon.Map) bool { _, ok := m.Get("pod"); return ok })
	_, ok := res.Get("team")
	assert.False(t, ok)
	assert.Equal(t, 1, logs.FilterMessageSnippet("pod labels are off").Len())
}

func TestPodLabelsConfigErrors(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Attribution.Kubernetes.PodLabels = true
	cfg.Attribution.Kubernetes.PodLabelAllowlist = []string{"^app$", "(bad"}
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.ErrorContains(t, err, "attribution::kubernetes::pod_labels: needs attribution::kubernetes::enabled")
	assert.ErrorContains(t, err, "attribution::kubernetes::node_name: must be set when pod_labels is true")
	assert.ErrorContains(t, err, `attribution::kubernetes::pod_label_allowlist: [1] "(bad"`)
	assert.Nil(t, newPodLabeler(createDefaultConfig().(*Config), zap.NewNop()), "off by default")
}

var _ podLabeler = (*clusterPodLabels)(nil)
