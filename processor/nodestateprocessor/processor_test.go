package nodestateprocessor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor/internal/metadata"
)

func TestStartWithoutExtension(t *testing.T) {
	f := NewFactory()
	set := processortest.NewNopSettings(metadata.Type)
	p, err := f.CreateMetrics(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	err = p.Start(context.Background(), componenttest.NewNopHost())
	require.EqualError(t, err, `nodestateprocessor: start: extension "nodestate" is not configured: add it under extensions and service::extensions`)

	// A named extension that is not there is named in the error.
	cfg := &Config{Extension: component.MustNewIDWithName("nodestate", "agent")}
	l, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	h, _ := startedExtension(t)
	err = l.Start(context.Background(), h)
	require.ErrorContains(t, err, `extension "nodestate/agent" is not configured`)
}

func TestStartWithExtensionOfAnotherKind(t *testing.T) {
	notAStore := struct {
		component.StartFunc
		component.ShutdownFunc
	}{}
	h := host{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{
		component.MustNewID("nodestate"): notAStore,
	}}
	f := NewFactory()
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	err = p.Start(context.Background(), h)
	require.ErrorContains(t, err, "nodestateprocessor: start: ")
	require.ErrorContains(t, err, `extension "nodestate"`)
	require.ErrorContains(t, err, "is not a nodestate extension")
}

func TestNextConsumerErrorReturned(t *testing.T) {
	h, _ := startedExtension(t)
	f := NewFactory()
	wantErr := errors.New("downstream refused")
	set := processortest.NewNopSettings(metadata.Type)
	mp, err := f.CreateMetrics(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewErr(wantErr))
	require.NoError(t, err)
	lp, err := f.CreateLogs(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewErr(wantErr))
	require.NoError(t, err)
	require.NoError(t, mp.Start(context.Background(), h))
	require.NoError(t, lp.Start(context.Background(), h))
	assert.ErrorIs(t, mp.ConsumeMetrics(context.Background(), readGoldenMetrics(t, dcgmGolden)), wantErr)
	assert.ErrorIs(t, lp.ConsumeLogs(context.Background(), readGoldenLogs(t)), wantErr)
	require.NoError(t, mp.Shutdown(context.Background()))
	require.NoError(t, lp.Shutdown(context.Background()))
}

// Before Start (or after Shutdown) there is no store: data still passes.
func TestPassesThroughWithoutStore(t *testing.T) {
	f := NewFactory()
	sink := new(consumertest.MetricsSink)
	mp, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, mp.ConsumeMetrics(context.Background(), readGoldenMetrics(t, dcgmGolden)))
	assert.Equal(t, 1, len(sink.AllMetrics()))
}
