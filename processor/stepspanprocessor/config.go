package stepspanprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config is the configuration of the stepspan processor.
type Config struct {
	// CollectiveWait holds a step span this long after it arrives, so that
	// the rank's collectives (flight recorder dumps, the inspector) that
	// arrive later are folded into it. Default 5s.
	CollectiveWait time.Duration `mapstructure:"collective_wait"`
	// OrphanAfter forwards collective spans unchanged when no step span of
	// their rank claimed them for this long (jobs without the step SDK).
	// Default 30s.
	OrphanAfter time.Duration `mapstructure:"orphan_after"`
	// MaxOpenSteps bounds the step spans held at once; beyond it the oldest
	// is sent at once. Default 4096.
	MaxOpenSteps int `mapstructure:"max_open_steps"`
	// MaxCollectivesPerRank bounds the collectives kept per rank. Default 4096.
	MaxCollectivesPerRank int `mapstructure:"max_collectives_per_rank"`
	// MaxCollectives bounds the collectives kept across all ranks, so that
	// what the processor holds is bounded by the node, not by its ranks
	// (a flight-recorder dump of every rank of a job arrives at once: 16
	// ranks of 20,000 entries). Beyond it a collective is passed on at once,
	// unsummarised. Default 16384 (about 28 MiB at 1.7 KiB a collective).
	MaxCollectives int `mapstructure:"max_collectives"`
	// MaxRanks bounds the ranks with collectives kept. Default 1024.
	MaxRanks int `mapstructure:"max_ranks"`
	// AnomalyFactor: a collective this many times slower than the median of
	// its kind on its rank is sent as a full span under the rank's step
	// span; timed-out and incomplete ones always are. Default 3.
	AnomalyFactor float64 `mapstructure:"anomaly_factor"`
	// MaxAttributeBytes caps string attributes copied from scripts. Default 4096.
	MaxAttributeBytes int `mapstructure:"max_attribute_bytes"`
	// NodeState names the nodestate extension that holds this node's GPU and
	// InfiniBand health; empty: no health context.
	NodeState *component.ID `mapstructure:"nodestate"`
	// HealthWindow is how far back from a step's end the GPU's and the IB
	// ports' counters are compared. Default 60s; 0 compares over the step's
	// own interval (with 10-30 s readings and 1-10 s steps that is mostly
	// zero: no reading falls inside the step).
	HealthWindow time.Duration `mapstructure:"health_window"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration; messages name the key and the value.
func (cfg *Config) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"collective_wait": cfg.CollectiveWait, "orphan_after": cfg.OrphanAfter} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %s", name, d))
		}
	}
	if cfg.HealthWindow < 0 {
		errs = append(errs, fmt.Errorf("health_window: must not be negative, got %s", cfg.HealthWindow))
	}
	if cfg.OrphanAfter > 0 && cfg.OrphanAfter < cfg.CollectiveWait {
		errs = append(errs, fmt.Errorf("orphan_after: %s must not be shorter than collective_wait %s", cfg.OrphanAfter, cfg.CollectiveWait))
	}
	for name, n := range map[string]int{"max_open_steps": cfg.MaxOpenSteps, "max_collectives_per_rank": cfg.MaxCollectivesPerRank,
		"max_collectives": cfg.MaxCollectives, "max_ranks": cfg.MaxRanks, "max_attribute_bytes": cfg.MaxAttributeBytes} {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %d", name, n))
		}
	}
	if cfg.AnomalyFactor <= 1 {
		errs = append(errs, fmt.Errorf("anomaly_factor: must be greater than 1, got %g", cfg.AnomalyFactor))
	}
	return errors.Join(errs...)
}
