package nodestateextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

// nodeStateExtension is the extension: a MemoryStore (the nodestate.Store
// other components find through host.GetExtensions) with a lifecycle.
type nodeStateExtension struct {
	*nodestate.MemoryStore
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
}

var _ nodestate.Store = (*nodeStateExtension)(nil)

func newExtension(cfg *Config, set extension.Settings) (*nodeStateExtension, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("nodestateextension: creating telemetry: %w", err)
	}
	e := &nodeStateExtension{logger: set.Logger, telemetry: tb}
	e.MemoryStore = nodestate.NewMemoryStore(cfg.limits(), nodestate.WithEvictionHook(e.evicted))
	return e, nil
}

// evicted counts a forgotten GPU or port. The store calls it under its lock,
// so it only counts.
func (e *nodeStateExtension) evicted(kind string, reason nodestate.EvictionReason) {
	e.telemetry.NodestateEvictions.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrKind, kind),
		attribute.String(metadata.TelemetryAttrReason, string(reason)),
	)))
}

// Start does nothing: the store is ready when created, so a processor that
// finds it in its own Start can record at once.
func (e *nodeStateExtension) Start(context.Context, component.Host) error {
	return nil
}

// Shutdown forgets the state; the collector stops extensions after every
// pipeline, so no component records any more.
func (e *nodeStateExtension) Shutdown(context.Context) error {
	st := e.Stats()
	e.logger.Debug("nodestateextension: shutting down",
		zap.Int("gpus", st.GPUs), zap.Int("ib_ports", st.IBPorts),
		zap.Uint64("evicted_gpus", st.EvictedGPUs), zap.Uint64("evicted_ib_ports", st.EvictedIBPorts),
		zap.Uint64("dropped", st.Dropped))
	e.Reset()
	e.telemetry.Shutdown()
	return nil
}
