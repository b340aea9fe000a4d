package electionextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/electionextension"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-gpu/otelcol-gpu/extension/electionextension/internal/metadata"
)

var errConfigNotElection = errors.New("electionextension: config is not a *electionextension.Config")

// NewFactory creates the factory of the election extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config { return &Config{} }

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	if _, ok := cfg.(*Config); !ok {
		return nil, errConfigNotElection
	}
	return newExtension(set), nil
}
