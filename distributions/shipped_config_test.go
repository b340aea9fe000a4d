// Package distributions_test checks the shipped configurations as the
// binaries resolve them: file and environment providers, then each
// component's own decoding and Validate.
package distributions_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dcgmConfig resolves the file as the agent does and decodes and validates
// the named dcgm receiver.
func dcgmConfig(t *testing.T, file, id string) (*dcgmreceiver.Config, error) {
	t.Helper()
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + filepath.Join("agent", file)},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	require.NoError(t, err)
	conf, err := resolver.Resolve(context.Background())
	require.NoError(t, err)
	require.NoError(t, resolver.Shutdown(context.Background()))
	sub, err := conf.Sub("receivers::" + id)
	require.NoError(t, err)
	cfg := dcgmreceiver.NewFactory().CreateDefaultConfig().(*dcgmreceiver.Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return nil, err
	}
	return cfg, confmap.Validate(cfg)
}

// Issue 31: DCGM_EXPORTER_INTERVAL keeps dcgm-exporter's unit
// (milliseconds, default 30000); a value the old Go-duration reading took
// as nanoseconds is refused naming the key, never run.
func TestDCGMExporterIntervalIsMilliseconds(t *testing.T) {
	for value, want := range map[string]time.Duration{"": 30 * time.Second, "30000": 30 * time.Second, "1000": time.Second, "100": 100 * time.Millisecond} {
		t.Run("DCGM_EXPORTER_INTERVAL="+value, func(t *testing.T) {
			if value != "" {
				t.Setenv("DCGM_EXPORTER_INTERVAL", value)
			}
			cfg, err := dcgmConfig(t, "prometheus-endpoint.yaml", "dcgm/prometheus")
			require.NoError(t, err)
			assert.Equal(t, want, cfg.CollectionInterval)
			assert.Equal(t, want, cfg.ProfilingInterval)
		})
	}
	for value, msg := range map[string]string{
		"30":  "collection_interval: 30ms is under the 100ms floor",
		"10s": "collection_interval",
	} {
		t.Run("DCGM_EXPORTER_INTERVAL="+value+" refused", func(t *testing.T) {
			t.Setenv("DCGM_EXPORTER_INTERVAL", value)
			_, err := dcgmConfig(t, "prometheus-endpoint.yaml", "dcgm/prometheus")
			require.Error(t, err)
			assert.ErrorContains(t, err, msg)
		})
	}
}

// A bare number in a Go-duration variable is nanoseconds: refused at
// start naming the key, where it used to scrape every 10 ns.
func TestGPUCollectionIntervalWithoutUnitIsRefused(t *testing.T) {
	t.Setenv("GPU_COLLECTION_INTERVAL", "10")
	_, err := dcgmConfig(t, "config.yaml", "dcgm")
	require.Error(t, err)
	assert.ErrorContains(t, err, "collection_interval: 10ns is under the 100ms floor; give a unit")
	t.Setenv("GPU_COLLECTION_INTERVAL", "10s")
	cfg, err := dcgmConfig(t, "config.yaml", "dcgm")
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
}
