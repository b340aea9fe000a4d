package nodeauthextension

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	// No credential source by default: the collector does not start
	// without one.
	require.ErrorContains(t, cfg.Validate(), "set tokens_file")
	assert.Equal(t, "otelcol-gpu-central", cfg.Kubernetes.Audience)
	assert.Equal(t, 30*time.Second, cfg.Kubernetes.CacheTTL)
	assert.Equal(t, 4096, cfg.Kubernetes.CacheSize)
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	def := createDefaultConfig().(*Config).Kubernetes
	k8s := func(mutate func(*KubernetesConfig)) KubernetesConfig {
		k := def
		k.ServiceAccount = "otelcol-gpu/otelcol-gpu-agent"
		if mutate != nil {
			mutate(&k)
		}
		return k
	}
	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{name: "file", want: &Config{TokensFile: "/etc/otelcol-gpu/agent-tokens", Kubernetes: def}},
		{name: "kubernetes", want: &Config{Kubernetes: k8s(nil)}},
		{name: "kubernetes_custom", want: &Config{Kubernetes: KubernetesConfig{
			ServiceAccount: "gpu-monitoring/agent", Audience: "central.example", Kubeconfig: "/etc/central/kubeconfig",
			CacheTTL: time.Minute, CacheSize: 100,
		}}},
		{name: "neither", wantErr: "set tokens_file (a file of \"<token> <node>\" lines) or kubernetes::service_account"},
		{name: "both", wantErr: `tokens_file "/etc/otelcol-gpu/agent-tokens" and kubernetes::service_account "otelcol-gpu/otelcol-gpu-agent": set one of them`},
		{name: "spaced_file", wantErr: `tokens_file "/etc/otelcol-gpu/agent-tokens ": leading or trailing white space`},
		{name: "no_namespace", wantErr: `kubernetes::service_account "otelcol-gpu-agent": want namespace/name`},
		{name: "bad_name", wantErr: `kubernetes::service_account "otelcol-gpu/Agent_1": want namespace/name`},
		{name: "no_audience", wantErr: `kubernetes::audience "": want the projected token's audience`},
		{name: "long_ttl", wantErr: "kubernetes::cache_ttl 1h0m0s: want 0 to 5m0s"},
		{name: "no_cache_size", wantErr: "kubernetes::cache_size 0: want 1 to 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}
