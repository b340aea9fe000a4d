package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
)

var errConfigNotFaultConsole = errors.New("faultconsoleextension: config is not a *faultconsoleextension.Config")

// NewFactory creates the factory of the faultconsole extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{
		Endpoint:          defaultEndpoint,
		MaxFaults:         defaultMaxFaults,
		ResolvedRetention: defaultResolvedRetention,
		MaxJobs:           defaultMaxJobs,
		HeatmapSteps:      defaultHeatmapSteps,
		MaxRanks:          defaultMaxRanks,
		MaxHeatmapCells:   defaultMaxHeatmapCells,
		Forward:           ForwardConfig{Timeout: defaultForwardTimeout},
	}
}

func createExtension(_ context.Context, set extension.Settings, baseCfg component.Config) (extension.Extension, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errConfigNotFaultConsole
	}
	return newExtension(cfg, set)
}
