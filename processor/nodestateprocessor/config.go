package nodestateprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
)

// Config is the configuration of the nodestate processor.
type Config struct {
	// Extension is the id of the nodestate extension to record into, e.g.
	// "nodestate" or "nodestate/agent". Default "nodestate".
	Extension component.ID `mapstructure:"extension"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	if cfg.Extension.Type().String() == "" {
		return errors.New(`extension must name the nodestate extension, e.g. "nodestate"`)
	}
	return nil
}
