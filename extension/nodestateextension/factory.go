package nodestateextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

var errConfigNotNodeState = errors.New("nodestateextension: config is not a *nodestateextension.Config")

// NewFactory creates the factory of the nodestate extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	l := nodestate.DefaultLimits()
	return &Config{
		Retention:           l.Retention,
		MaxGPUs:             l.MaxGPUs,
		MaxIBPorts:          l.MaxIBPorts,
		MaxSamplesPerSeries: l.MaxSamplesPerSeries,
		MaxXIDEventsPerGPU:  l.MaxXIDEventsPerGPU,
	}
}

func createExtension(_ context.Context, set extension.Settings, baseCfg component.Config) (extension.Extension, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errConfigNotNodeState
	}
	return newExtension(cfg, set)
}
