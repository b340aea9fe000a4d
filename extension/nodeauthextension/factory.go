package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
)

var errConfigNotNodeAuth = errors.New("nodeauthextension: config is not a *nodeauthextension.Config")

// NewFactory creates the factory of the nodeauth extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{Kubernetes: KubernetesConfig{
		Audience:  defaultAudience,
		CacheTTL:  defaultCacheTTL,
		CacheSize: defaultCacheSize,
	}}
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotNodeAuth
	}
	return newNodeAuth(c, set)
}
