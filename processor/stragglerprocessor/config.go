package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/component"

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

	// The job's rules on top of the per-step rule (internal/straggler.JobOptions);
	// zero values take the package's defaults.
	//
	// MaxSlowShare: more than this share of a group (and at least two
	// ranks) slow at once is one job-level finding (straggler.job_verdict
	// job.slowdown on the root span), not that many stragglers. Default 1/3.
	MaxSlowShare float64 `mapstructure:"max_slow_share"`
	// CloseExcess: an open verdict resolves only after persistence_n steps
	// below this excess over the rank's group (hysteresis). Default 0.10,
	// below min_excess.
	CloseExcess float64 `mapstructure:"close_excess"`
	// SelfExcess: a rank this much slower than its own baseline (after the
	// job's pace) while its group's level did not move, or while its group
	// has fewer than min_group_size ranks, is flagged. Default 0.5.
	SelfExcess float64 `mapstructure:"self_excess"`
	// WarmupSteps: a rank's steps before its own baseline exists; without
	// training.pp_stage, the job's steps before its groups are inferred
	// (nothing is flagged meanwhile). Default 5, at most 15.
	WarmupSteps int `mapstructure:"warmup_steps"`
	// StageGap: without training.pp_stage, rank levels further apart than
	// this fraction separate inferred groups. Default 0.15.
	StageGap float64 `mapstructure:"stage_gap"`

	// ClockSkewWarning: a job whose nodes' clocks disagree by more than
	// this (the same step's end times compared across its nodes, in
	// clockSkewSteps decided steps in a row) gets one warning and counts
	// in otelcol_processor_straggler_jobs_clock_skew. 0 turns the check
	// off. Default 30s.
	ClockSkewWarning time.Duration `mapstructure:"clock_skew_warning"`

	// Console is the component ID of a fault console extension (for
	// example faultconsole) that gets every rank's judged step for its
	// heatmap; empty: none.
	Console string `mapstructure:"console"`

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

// jobOptions are the options of each job's straggler.Job; ranks beyond
// max_ranks_per_step keep no history.
func (cfg *Config) jobOptions() straggler.JobOptions {
	return straggler.JobOptions{
		Detect: cfg.detectionOptions(), Persistence: cfg.persistenceOptions(),
		MaxSlowShare: cfg.MaxSlowShare, CloseExcess: cfg.CloseExcess, SelfExcess: cfg.SelfExcess,
		Warmup: cfg.WarmupSteps, StageGap: cfg.StageGap, MaxRanks: cfg.MaxRanksPerStep,
	}
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
	if err := cfg.jobOptions().Validate(); err != nil { // the detection options too
		errs = append(errs, err)
	}
	if cfg.PersistenceK < 0 || cfg.PersistenceN < 0 {
		errs = append(errs, fmt.Errorf("persistence_k, persistence_n: must not be negative, got %d of %d", cfg.PersistenceK, cfg.PersistenceN))
	}
	if cfg.PersistenceK > 0 && cfg.PersistenceN > 0 && cfg.PersistenceK > cfg.PersistenceN {
		errs = append(errs, fmt.Errorf("persistence_k: %d must not exceed persistence_n %d", cfg.PersistenceK, cfg.PersistenceN))
	}
	if cfg.ClockSkewWarning < 0 {
		errs = append(errs, fmt.Errorf("clock_skew_warning: must not be negative (0 turns the check off), got %s", cfg.ClockSkewWarning))
	}
	if _, err := cfg.consoleID(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// consoleID parses console; the zero ID when it is empty (no console).
func (cfg *Config) consoleID() (id component.ID, err error) {
	if cfg.Console == "" {
		return id, nil
	}
	if err := id.UnmarshalText([]byte(cfg.Console)); err != nil {
		return id, fmt.Errorf("console: %q is not a component ID (type[/name], e.g. faultconsole): %w", cfg.Console, err)
	}
	return id, nil
}
