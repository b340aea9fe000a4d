package gpufaultsreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.LogsStability())
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Brokers = newCluster(t)
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), newElectionHost(t)))
	require.NoError(t, r.Shutdown(context.Background()))
}

// Without the election extension the receiver does not start: the
// remediation exporter could not know which replica acts, and every one
// would. Two of them is ambiguous too.
func TestStartNeedsTheElection(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Brokers = newCluster(t)
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	err = r.Start(context.Background(), componenttest.NewNopHost())
	assert.EqualError(t, err, `gpufaultsreceiver: no "election" extension: the gpu_faults consumer group elects the one replica whose remediation exporter acts, and the election reaches it through that extension; add "election" under extensions and to service::extensions (distributions/gateway/config.yaml)`)
	require.NoError(t, r.Shutdown(context.Background()))

	a, b := newElectionHost(t), newElectionHost(t)
	two := &electionHost{exts: map[component.ID]component.Component{}}
	for id, ext := range a.exts {
		two.exts[id] = ext
	}
	for id, ext := range b.exts {
		two.exts[component.NewIDWithName(id.Type(), "other")] = ext
	}
	err = r.Start(context.Background(), two)
	assert.ErrorContains(t, err, "gpufaultsreceiver: 2 election extensions in service::extensions (election, election/other)")
	require.NoError(t, r.Shutdown(context.Background()))
}

// A second gpu_faults receiver in one collector cannot offer a second
// election: its Start fails naming the first.
func TestSecondReceiverInOneCollector(t *testing.T) {
	brokers := newCluster(t)
	host := newElectionHost(t)
	start := func(name string) (component.Component, error) {
		cfg := createDefaultConfig().(*Config)
		cfg.Brokers = brokers
		set := receivertest.NewNopSettings(metadata.Type)
		set.ID = component.NewIDWithName(metadata.Type, name)
		r, err := NewFactory().CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
		return r, r.Start(context.Background(), host)
	}
	_, err := start("a")
	require.NoError(t, err)
	_, err = start("b")
	assert.ErrorContains(t, err, `gpufaultsreceiver: extension "election" already carries the election of receiver "gpu_faults/a"; "gpu_faults/b" cannot offer another`)
}

// Shutdown without Start (the collector does this when another component
// fails to start) returns at once.
func TestShutdownWithoutStart(t *testing.T) {
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type),
		createDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Shutdown(context.Background()))
}

func TestFactoryWrongConfig(t *testing.T) {
	_, err := createLogsReceiver(context.Background(), receivertest.NewNopSettings(metadata.Type), &struct{}{}, consumertest.NewNop())
	require.ErrorIs(t, err, errConfigNotGPUFaults)
}
