package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/plog"
)

// Config is the configuration of the rate limit processor.
type Config struct {
	// Traces limits spans per key (default: per training job).
	Traces TracesConfig `mapstructure:"traces"`
	// Logs limits low-severity log records per key (default: per host).
	Logs LogsConfig `mapstructure:"logs"`
	// MaxKeys bounds the buckets of each signal; beyond it the least
	// recently used bucket is evicted. Default 10000.
	MaxKeys int `mapstructure:"max_keys"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// TracesConfig is the span budget per key.
type TracesConfig struct {
	// Enabled: false passes every span on. Default true.
	Enabled bool `mapstructure:"enabled"`
	// Key is the attribute whose value names a span's bucket: looked up on
	// the resource, then the span, then the client metadata. Default
	// training.job.id.
	Key string `mapstructure:"key"`
	// SpansPerSecond is the sustained rate per key. Default 100000.
	SpansPerSecond float64 `mapstructure:"spans_per_second"`
	// Burst is the bucket's size: how many spans a key may send at once
	// after being quiet. Default 200000.
	Burst int `mapstructure:"burst"`
	// ProtectedReserve is how far below empty a key's bucket (and its
	// node's) may go for protected spans (error status, step.slow): they
	// are charged like any span but dropped last. Default 10000.
	ProtectedReserve int `mapstructure:"protected_reserve"`
	// PerNode is one budget over all keys of a node, so that rotating the
	// key (a new job id per batch) cannot multiply a sender's budget.
	PerNode PerNodeConfig `mapstructure:"per_node"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// PerNodeConfig is the span budget of a node over all its keys.
type PerNodeConfig struct {
	// Enabled: false leaves only the per-key budget. Default true.
	Enabled bool `mapstructure:"enabled"`
	// Key is the attribute naming the node: resource, then span, then
	// client metadata. Default host.name (on the agent the provenance
	// processor stamps it on everything a script sends).
	Key string `mapstructure:"key"`
	// SpansPerSecond is the sustained rate per node. Default 200000.
	SpansPerSecond float64 `mapstructure:"spans_per_second"`
	// Burst is the node bucket's size. Default 400000.
	Burst int `mapstructure:"burst"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// LogsConfig is the budget per key of low-severity log records.
type LogsConfig struct {
	// Enabled: false passes every record on. Default true.
	Enabled bool `mapstructure:"enabled"`
	// Key is the attribute whose value names a record's bucket: looked up
	// on the resource, then the record, then the client metadata. Default
	// host.name.
	Key string `mapstructure:"key"`
	// RecordsPerSecond is the sustained rate per key. Default 200.
	RecordsPerSecond float64 `mapstructure:"records_per_second"`
	// Burst is the bucket's size. Default 1000.
	Burst int `mapstructure:"burst"`
	// MaxSeverity: only records at or below it are limited. TRACE, DEBUG
	// or INFO cover their level (INFO: INFO to INFO4); TRACE2..INFO4 name
	// one severity number. Default INFO.
	MaxSeverity string `mapstructure:"max_severity"`
	// ProtectedReserve is how far below empty a key's bucket may go for
	// protected records that do not come from this collector's own
	// receivers (WARN and above, step records, training.error, ...): they
	// are charged like any record but dropped last. Default 1000.
	ProtectedReserve int `mapstructure:"protected_reserve"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// severityLevels maps the accepted max_severity names (upper case) to the
// highest severity number they cover. WARN and above are never limited by
// max_severity (they are priority: charged, dropped last), so they are not
// accepted.
var severityLevels = map[string]plog.SeverityNumber{
	"TRACE": plog.SeverityNumberTrace4, "TRACE2": plog.SeverityNumberTrace2, "TRACE3": plog.SeverityNumberTrace3, "TRACE4": plog.SeverityNumberTrace4,
	"DEBUG": plog.SeverityNumberDebug4, "DEBUG2": plog.SeverityNumberDebug2, "DEBUG3": plog.SeverityNumberDebug3, "DEBUG4": plog.SeverityNumberDebug4,
	"INFO": plog.SeverityNumberInfo4, "INFO2": plog.SeverityNumberInfo2, "INFO3": plog.SeverityNumberInfo3, "INFO4": plog.SeverityNumberInfo4,
}

// maxSeverityNumber returns the highest severity number max_severity
// limits.
func (c *LogsConfig) maxSeverityNumber() (plog.SeverityNumber, bool) {
	n, ok := severityLevels[strings.ToUpper(strings.TrimSpace(c.MaxSeverity))]
	return n, ok
}

// Validate checks the configuration; messages name the key and the value.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.MaxKeys <= 0 {
		errs = append(errs, fmt.Errorf("max_keys: must be greater than 0, got %d", cfg.MaxKeys))
	}
	if cfg.Traces.Enabled {
		errs = append(errs, validateBucket("traces", cfg.Traces.Key, "spans_per_second", cfg.Traces.SpansPerSecond, cfg.Traces.Burst)...)
		errs = append(errs, validateReserve("traces", cfg.Traces.ProtectedReserve)...)
		if n := cfg.Traces.PerNode; n.Enabled {
			errs = append(errs, validateBucket("traces::per_node", n.Key, "spans_per_second", n.SpansPerSecond, n.Burst)...)
		}
	}
	if cfg.Logs.Enabled {
		errs = append(errs, validateBucket("logs", cfg.Logs.Key, "records_per_second", cfg.Logs.RecordsPerSecond, cfg.Logs.Burst)...)
		errs = append(errs, validateReserve("logs", cfg.Logs.ProtectedReserve)...)
		if _, ok := cfg.Logs.maxSeverityNumber(); !ok {
			errs = append(errs, fmt.Errorf("logs::max_severity: must be one of TRACE, DEBUG, INFO (or TRACE2..INFO4); WARN and above are never limited; got %q", cfg.Logs.MaxSeverity))
		}
	}
	return errors.Join(errs...)
}

func validateBucket(section, key, rateName string, rate float64, burst int) []error {
	var errs []error
	if strings.TrimSpace(key) == "" {
		errs = append(errs, fmt.Errorf("%s::key: must not be empty", section))
	}
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
		errs = append(errs, fmt.Errorf("%s::%s: must be a finite number greater than 0, got %g", section, rateName, rate))
	}
	if burst < 1 {
		errs = append(errs, fmt.Errorf("%s::burst: must be at least 1, got %d", section, burst))
	}
	return errs
}

func validateReserve(section string, reserve int) []error {
	if reserve < 0 {
		return []error{fmt.Errorf("%s::protected_reserve: must be 0 or more, got %d", section, reserve)}
	}
	return nil
}
