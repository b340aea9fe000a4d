package nodestateextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"

import (
	"errors"
	"fmt"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

// Config is the configuration of the nodestate extension. Worst-case memory
// is about max_gpus x max_samples_per_series x 640 bytes (README.md).
type Config struct {
	// Retention is how long readings are kept, counted back from each
	// series' newest reading; a GPU or port not recorded for this long is
	// forgotten. Default 10m: longer than any training step.
	Retention time.Duration `mapstructure:"retention"`
	// MaxGPUs is how many GPUs (or MIG instances) are held; a new one
	// beyond it evicts the least recently recorded. Default 64.
	MaxGPUs int `mapstructure:"max_gpus"`
	// MaxIBPorts is how many InfiniBand ports are held. Default 64.
	MaxIBPorts int `mapstructure:"max_ib_ports"`
	// MaxSamplesPerSeries bounds each gauge and counter series; it should
	// cover retention / the fastest collection interval. Default 600.
	MaxSamplesPerSeries int `mapstructure:"max_samples_per_series"`
	// MaxXIDEventsPerGPU bounds the XID log records held per GPU. Default
	// 256.
	MaxXIDEventsPerGPU int `mapstructure:"max_xid_events_per_gpu"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration. Messages name the key and the bad value.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Retention <= 0 {
		errs = append(errs, fmt.Errorf("retention must be greater than 0, got %q", cfg.Retention.String()))
	}
	for _, limit := range []struct {
		key      string
		value    int
		smallest int
	}{
		{"max_gpus", cfg.MaxGPUs, 1},
		{"max_ib_ports", cfg.MaxIBPorts, 1},
		{"max_samples_per_series", cfg.MaxSamplesPerSeries, 2}, // a delta needs two readings
		{"max_xid_events_per_gpu", cfg.MaxXIDEventsPerGPU, 1},
	} {
		if limit.value < limit.smallest {
			errs = append(errs, fmt.Errorf("%s must be at least %d, got %d", limit.key, limit.smallest, limit.value))
		}
	}
	return errors.Join(errs...)
}

// limits turns the configuration into the store's limits.
func (cfg *Config) limits() nodestate.Limits {
	return nodestate.Limits{
		Retention:           cfg.Retention,
		MaxGPUs:             cfg.MaxGPUs,
		MaxIBPorts:          cfg.MaxIBPorts,
		MaxSamplesPerSeries: cfg.MaxSamplesPerSeries,
		MaxXIDEventsPerGPU:  cfg.MaxXIDEventsPerGPU,
	}
}
