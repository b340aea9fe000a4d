package nodestateprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// host is a collector host with the given extensions.
type host struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

// startedExtension creates and starts a real nodestate extension and a host
// that holds it under the id "nodestate"; it is shut down with the test.
func startedExtension(tb testing.TB) (host, nodestate.Store) {
	f := nodestateextension.NewFactory()
	id := component.NewID(f.Type())
	set := extension.Settings{ID: id, TelemetrySettings: componenttest.NewNopTelemetrySettings(), BuildInfo: component.NewDefaultBuildInfo()}
	ext, err := f.Create(context.Background(), set, f.CreateDefaultConfig())
	require.NoError(tb, err)
	h := host{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: ext}}
	require.NoError(tb, ext.Start(context.Background(), h))
	tb.Cleanup(func() { require.NoError(tb, ext.Shutdown(context.Background())) })
	return h, ext.(nodestate.Store)
}
