// Package gomemlimit holds the rule that sizes a collector's GOMEMLIMIT
// against its memory_limiter, and reads memory sizes as the Go runtime and
// systemd write them. The deployment tests (deploy/kubernetes,
// deploy/systemd) hold every shipped GOMEMLIMIT to it.
package gomemlimit // import "github.com/otelcol-gpu/otelcol-gpu/deploy/internal/gomemlimit"

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// CheckConfig is Check with the memory_limiter of a collector
// configuration (YAML, processors.memory_limiter).
func CheckConfig(goMemLimit, memoryLimit int64, config []byte) error {
	var cfg struct {
		Processors struct {
			MemoryLimiter struct {
				LimitPercentage      int64 `yaml:"limit_percentage"`
				SpikeLimitPercentage int64 `yaml:"spike_limit_percentage"`
			} `yaml:"memory_limiter"`
		} `yaml:"processors"`
	}
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("collector configuration: %w", err)
	}
	ml := cfg.Processors.MemoryLimiter
	return Check(goMemLimit, memoryLimit, ml.LimitPercentage, ml.SpikeLimitPercentage)
}

// Check says whether goMemLimit suits a process whose memory limit is
// memoryLimit and whose memory_limiter has limit_percentage limitPct and
// spike_limit_percentage spikePct (of the memory limit; 0 is a fifth of
// the limit, as the memory_limiter takes it). It must be below the
// limiter's soft limit, the limit less the spike, so that the runtime
// collects garbage before the limiter counts it as load and refuses data;
// and above 80 % of it, or the runtime collects more often than the limit
// requires.
func Check(goMemLimit, memoryLimit, limitPct, spikePct int64) error {
	if limitPct <= 0 || limitPct > 100 || spikePct < 0 || spikePct >= limitPct {
		return fmt.Errorf("memory_limiter limit_percentage %d, spike_limit_percentage %d: want 0 <= spike < limit <= 100", limitPct, spikePct)
	}
	limit, spike := memoryLimit*limitPct/100, memoryLimit*spikePct/100
	if spike == 0 {
		spike = limit / 5
	}
	soft := limit - spike
	switch {
	case goMemLimit >= soft:
		return fmt.Errorf("GOMEMLIMIT %d MiB is not below the memory_limiter's soft limit, %d MiB (limit_percentage %d, spike_limit_percentage %d of %d MiB)",
			goMemLimit>>20, soft>>20, limitPct, spikePct, memoryLimit>>20)
	case goMemLimit <= soft/10*8:
		return fmt.Errorf("GOMEMLIMIT %d MiB is under 80 %% of the memory_limiter's soft limit (%d MiB): needless collections",
			goMemLimit>>20, soft>>20)
	}
	return nil
}

// Parse reads GOMEMLIMIT as the Go runtime does: bytes, with an optional
// B, KiB, MiB, GiB or TiB suffix.
func Parse(s string) (int64, error) {
	return parse("GOMEMLIMIT", s, []unit{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}})
}

// ParseSystemd reads a systemd size (MemoryMax=): bytes, with an optional
// K, M, G or T suffix, each 1024 times the last.
func ParseSystemd(s string) (int64, error) {
	return parse("systemd size", s, []unit{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}})
}

type unit struct {
	suffix string
	shift  uint
}

func parse(what, s string, units []unit) (int64, error) {
	number, shift := s, uint(0)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			number, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(number, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%s %q: want a whole number of bytes with an optional unit", what, s)
	}
	return n << shift, nil
}
