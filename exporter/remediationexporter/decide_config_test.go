package remediationexporter

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

func TestDecisionsConfigDefaults(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.False(t, cfg.Decisions.Enabled(), "off until brokers are set")
	assert.Equal(t, "gpu_fault_decisions", cfg.Decisions.Topic)
	assert.Equal(t, 7*24*time.Hour, cfg.Decisions.Retention)
	assert.True(t, cfg.Kubernetes.LeaseEnabled, "today's behaviour")
	// The collector's own walk over the config accepts the default: the
	// empty broker list is "off", not an error.
	require.NoError(t, confmap.Validate(cfg))
}

func TestDecisionsConfigLoad(t *testing.T) {
	cfg := loadConfig(t, "decisions")
	require.NoError(t, confmap.Validate(cfg))
	assert.True(t, cfg.Decisions.Enabled())
	assert.Equal(t, []string{"kafka-0:9092", "kafka-1:9092"}, cfg.Decisions.Brokers)
	assert.Equal(t, "gpu_fault_decisions", cfg.Decisions.Topic)
	assert.Equal(t, 72*time.Hour, cfg.Decisions.Retention)
	assert.Equal(t, 5000, cfg.Decisions.MaxKeys)
	require.NotNil(t, cfg.Decisions.TLS)
	assert.Equal(t, "/etc/kafka/ca.pem", cfg.Decisions.TLS.CAFile)
	require.NotNil(t, cfg.Decisions.Authentication.SASL)
	assert.Equal(t, "SCRAM-SHA-512", cfg.Decisions.Authentication.SASL.Mechanism)
	assert.False(t, cfg.Kubernetes.LeaseEnabled)
	assert.Equal(t, 20*time.Second, cfg.Kubernetes.Lease.Duration, "the rest of lease still read")
}

func TestDecisionsConfigRejects(t *testing.T) {
	err := loadConfig(t, "decisions_with_lease").Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decisions.brokers")
	assert.Contains(t, err.Error(), "kubernetes.lease.enabled")

	err = loadConfig(t, "decisions_unsupported").Validate()
	require.Error(t, err)
	for _, want := range []string{"decisions: auth::kerberos", "topic must not be empty", "max_keys 0", "timeout 10ms"} {
		assert.Contains(t, err.Error(), want)
	}

	cfg := createDefaultConfig().(*Config)
	cfg.Decisions.Brokers = []string{"kafka:9092"}
	cfg.Decisions.Authentication.SASL = nil
	require.NoError(t, cfg.Validate(), "decisions without kubernetes: nothing to disagree with")
	cfg.Kubernetes.Enabled, cfg.Kubernetes.LeaseEnabled = true, false
	require.NoError(t, cfg.Validate())
}

func TestLeaseEnabledMustBeBool(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "lease_not_bool").String())
	require.NoError(t, err)
	err = sub.Unmarshal(createDefaultConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lease.enabled")
}

// The factory builds the decision log from the config: a dry-run exporter
// publishes its decisions, named host-pid-component.
func TestFactoryDecisionLog(t *testing.T) {
	cluster := newDecisionCluster(t)
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Decisions.Brokers = cluster.ListenAddrs()
	require.NoError(t, cfg.Validate())
	exp, err := f.CreateLogs(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, exp.ConsumeLogs(context.Background(), logsOf(semconv.ScopeFaultRecords, dbe)))
	require.NoError(t, exp.Shutdown(context.Background()))

	ds := readDecisions(t, cluster)
	require.Len(t, ds, 1)
	assert.Contains(t, ds[0].Replica, "-"+strconv.Itoa(os.Getpid())+"-remediation")
	assert.Equal(t, dbe.ID, ds[0].FaultID)
}
