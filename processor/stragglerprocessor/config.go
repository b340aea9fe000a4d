package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/straggler"
)

// Config is the configuration of the straggler processor.
type Config struct {
	// DecisionWait is how long after a step's first rank span the step is
	// decided with the ranks that reported, when fewer than
	// training.world_size did. Default 3s.
	DecisionWait time.Duration `mapstructure:"decision_wait"`
	// MaxJobs bounds the jobs (job id and attempt) with state; beyond it
	// the least recently seen job's open steps are decided and its state
	// dropped. Default 256.
	MaxJobs int `mapstructure:"max_jobs"`
	// MaxOpenStepsPerJob bounds a job's undecided steps; beyond it the
	// oldest is decided with what it has. Default 16.
	MaxOpenStepsPerJob int `mapstructure:"max_open_steps_per_job"`
	// MaxRanksPerStep bounds the ranks gathered for one step; ranks beyond
	// it are left out of the decision. Default 32768.
	MaxRanksPerStep int `mapstructure:"max_ranks_per_step"`
	// MaxHeldRanks bounds the rank records (about 100 bytes each) held in
	// open steps over all jobs; beyond it the oldest open step is decided.
	// Default 1048576.
	MaxHeldRanks int `mapstructure:"max_held_ranks"`
	// SlowStepFactor: a step longer than this many times the job's rolling
	// mean step duration carries step.slow = true. Default 3.
	SlowStepFactor float64 `mapstructure:"slow_step_factor"`
	// SlowStepWindow is how many recent steps the rolling mean covers.
	// Default 20.
	SlowStepWindow int `mapstructure:"slow_step_window"`

	// Detection: the per-step rule (internal/straggler.Options); zero
	// values take the package's defaults.
	Rule         straggler.Rule `mapstructure:"rule"`
	Factor       float64        `mapstructure:"factor"`
	ZThreshold   float64        `mapstructure:"z_threshold"`
	MinExcess    float64        `mapstructure:"min_excess"`
	MinGroupSize int            `mapstructure:"min_group_size"`
	// PersistenceK of the last PersistenceN decided steps must flag a rank
	// to open a verdict. Default 3 of 5.
	PersistenceK int `mapstructure:"persistence_k"`
	PersistenceN int `mapstructure:"persistence_n"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func (cfg *Config) detectionOptions() straggler.Options {
	o := straggler.DefaultOptions()
	if cfg.Rule != "" {
		o.Rule = cfg.Rule
	}
	if cfg.Factor != 0 {
		o.Factor = cfg.Factor
	}
	if cfg.ZThreshold != 0 {
		o.ZThreshold = cfg.ZThreshold
	}
	if cfg.MinExcess != 0 {
		o.MinExcess = cfg.MinExcess
	}
	if cfg.MinGroupSize != 0 {
		o.MinGroupSize = cfg.MinGroupSize
	}
	return o
}

func (cfg *Config) persistenceOptions() straggler.PersistenceOptions {
	return straggler.PersistenceOptions{K: cfg.PersistenceK, N: cfg.PersistenceN}
}

// Validate checks the configuration; messages name the key and the value.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.DecisionWait <= 0 {
		errs = append(errs, fmt.Errorf("decision_wait: must be greater than 0, got %s", cfg.DecisionWait))
	}
	for _, b := range []struct {
		name string
		v    int
	}{{"max_jobs", cfg.MaxJobs}, {"max_open_steps_per_job", cfg.MaxOpenStepsPerJob}, {"max_ranks_per_step", cfg.MaxRanksPerStep},
		{"max_held_ranks", cfg.MaxHeldRanks}, {"slow_step_window", cfg.SlowStepWindow}} {
		if b.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %d", b.name, b.v))
		}
	}
	if math.IsNaN(cfg.SlowStepFactor) || math.IsInf(cfg.SlowStepFactor, 0) || cfg.SlowStepFactor <= 1 {
		errs = append(errs, fmt.Errorf("slow_step_factor: must be a finite number greater than 1, got %g", cfg.SlowStepFactor))
	}
	if err := cfg.detectionOptions().Validate(); err != nil {
		errs = append(errs, err)
	}
	if cfg.PersistenceK < 0 || cfg.PersistenceN < 0 {
		errs = append(errs, fmt.Errorf("persistence_k, persistence_n: must not be negative, got %d of %d", cfg.PersistenceK, cfg.PersistenceN))
	}
	if cfg.PersistenceK > 0 && cfg.PersistenceN > 0 && cfg.PersistenceK > cfg.PersistenceN {
		errs = append(errs, fmt.Errorf("persistence_k: %d must not exceed persistence_n %d", cfg.PersistenceK, cfg.PersistenceN))
	}
	return errors.Join(errs...)
}
