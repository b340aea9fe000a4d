package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
)

// maxRanksLimit caps max_ranks: the rank bitset of one open step is
// max_ranks/8 bytes at most.
const maxRanksLimit = 1 << 20

// maxBuckets caps the histogram's buckets: each is a series per job.
const maxBuckets = 64

// Config is the configuration of the stepmetrics connector.
type Config struct {
	// Interval between emissions of the metrics (and at shutdown). Default 10s.
	Interval time.Duration `mapstructure:"interval"`
	// StepTimeout closes a step this long after its first rank arrived,
	// with the ranks seen, when not all of training.world_size arrived.
	// Default 30s.
	StepTimeout time.Duration `mapstructure:"step_timeout"`
	// JobExpiry forgets a job attempt (its cumulative histogram ends) when
	// no step span of it arrived for this long. Default 15m.
	JobExpiry time.Duration `mapstructure:"job_expiry"`
	// MaxJobs bounds the job attempts tracked at once; spans of further
	// ones are dropped and counted. Default 1024.
	MaxJobs int `mapstructure:"max_jobs"`
	// MaxOpenSteps bounds the steps of one job attempt waiting for their
	// ranks; beyond it the lowest step is closed early. Default 32.
	MaxOpenSteps int `mapstructure:"max_open_steps"`
	// MaxRanks: spans with training.rank at or above it are dropped.
	// Default 65536, at most 1048576.
	MaxRanks int `mapstructure:"max_ranks"`
	// Buckets are the explicit bounds of training.step.duration. Default
	// 0.1s to 60s (see createDefaultConfig).
	Buckets []time.Duration `mapstructure:"buckets"`
	// PeakFLOPS adds to or overrides the built-in table of dense BF16 peak
	// FLOP/s per GPU, keyed by a substring of gpu.model (case-insensitive;
	// the longest matching key wins).
	PeakFLOPS map[string]float64 `mapstructure:"peak_flops"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration; messages name the key and the value.
func (cfg *Config) Validate() error {
	var errs []error
	if err := interval.Check("interval", cfg.Interval, false); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		key string
		val time.Duration
	}{{"step_timeout", cfg.StepTimeout}, {"job_expiry", cfg.JobExpiry}} {
		if d.val <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %s", d.key, d.val))
		}
	}
	for _, n := range []struct {
		key string
		val int
	}{{"max_jobs", cfg.MaxJobs}, {"max_open_steps", cfg.MaxOpenSteps}, {"max_ranks", cfg.MaxRanks}} {
		if n.val <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %d", n.key, n.val))
		}
	}
	if cfg.MaxRanks > maxRanksLimit {
		errs = append(errs, fmt.Errorf("max_ranks: must be at most %d, got %d", maxRanksLimit, cfg.MaxRanks))
	}
	switch {
	case len(cfg.Buckets) == 0:
		errs = append(errs, errors.New("buckets: must not be empty"))
	case len(cfg.Buckets) > maxBuckets:
		errs = append(errs, fmt.Errorf("buckets: at most %d, got %d", maxBuckets, len(cfg.Buckets)))
	}
	for i, b := range cfg.Buckets {
		if b <= 0 {
			errs = append(errs, fmt.Errorf("buckets[%d]: must be greater than 0, got %s", i, b))
		}
		if i > 0 && b <= cfg.Buckets[i-1] {
			errs = append(errs, fmt.Errorf("buckets[%d]: %s must be greater than the previous bound %s", i, b, cfg.Buckets[i-1]))
		}
	}
	for model, peak := range cfg.PeakFLOPS {
		if strings.TrimSpace(model) == "" {
			errs = append(errs, errors.New("peak_flops: a GPU model key is empty"))
		}
		if !(peak > 0) || math.IsInf(peak, 0) {
			errs = append(errs, fmt.Errorf("peak_flops::%s: must be a finite number greater than 0, got %g", model, peak))
		}
	}
	return errors.Join(errs...)
}
