package provenanceprocessor

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

// Each signal's processor starts, mutates in place and shuts down.
func TestFactoryCreatesEverySignal(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	set := processortest.NewNopSettings(metadata.Type)
	cfg := &Config{HostName: own}
	tp, err := f.CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	lp, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	mp, err := f.CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	require.NoError(t, tp.Start(context.Background(), host))
	require.NoError(t, lp.Start(context.Background(), host))
	require.NoError(t, mp.Start(context.Background(), host))
	assert.True(t, tp.Capabilities().MutatesData)
	assert.True(t, lp.Capabilities().MutatesData)
	assert.True(t, mp.Capabilities().MutatesData)
	require.NoError(t, tp.Shutdown(context.Background()))
	require.NoError(t, lp.Shutdown(context.Background()))
	require.NoError(t, mp.Shutdown(context.Background()))
}

// An empty host_name resolves as the receivers do: the machine's name.
func TestDefaultHostNameIsTheMachines(t *testing.T) {
	p, err := newProvenance(&Config{}, processortest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	want, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, want, p.host)
}

func TestWrongConfigType(t *testing.T) {
	_, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), &struct{}{}, consumertest.NewNop())
	assert.ErrorIs(t, err, errConfigNotProvenance)
}
