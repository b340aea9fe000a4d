package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
)

// DefaultReasonPrefix marks a Slurm node reason as this exporter's, as
// NHC does with its own prefix. Only reasons that start with it are undone.
const DefaultReasonPrefix = "otelcol-gpu:"

// minWritableAPIVersion is the first slurmrestd OpenAPI version with a node
// update endpoint (Slurm 23.02). Slurm 22.05 (v0.0.36 to v0.0.38) can only
// read nodes over REST; use scontrol there.
const minWritableAPIVersion = 39

// Config is the Slurm section of the remediation exporter (`slurm:`).
// With slurmrestd.url set the REST transport is used, else scontrol.
type Config struct {
	// ScontrolPath is the scontrol binary. Default "scontrol" (from PATH).
	// SLURM_CONF in the collector's environment selects the cluster.
	ScontrolPath string `mapstructure:"scontrol_path"`
	// Slurmrestd, when URL is set, replaces scontrol (Slurm from a pod).
	Slurmrestd RestConfig `mapstructure:"slurmrestd"`
	// ReasonPrefix marks this exporter's drains. Default "otelcol-gpu:".
	ReasonPrefix string `mapstructure:"reason_prefix"`
	// StateFile keeps the breaker's tripped flag and its last reset across
	// restarts (JSON, written atomically). Empty: kept in memory only, so a
	// restart forgets a trip (the recount from Slurm still bounds drains).
	StateFile string `mapstructure:"state_file"`
	// StripDomainSuffix maps host.name to a NodeName by removing this
	// suffix (e.g. ".cluster.example"); empty keeps host.name as is.
	StripDomainSuffix string `mapstructure:"strip_domain_suffix"`
	// Timeout bounds one scontrol run or one HTTP request. Default 10s.
	Timeout time.Duration `mapstructure:"timeout"`
	// Breaker is the cluster-wide drain budget.
	Breaker BreakerConfig `mapstructure:"breaker"`
}

// RestConfig reaches slurmrestd with a JWT.
type RestConfig struct {
	// URL is http(s)://host:port or unix:///path/to/slurmrestd.socket.
	URL string `mapstructure:"url"`
	// Token is sent as X-SLURM-USER-TOKEN (e.g. ${env:SLURM_JWT}).
	Token configopaque.String `mapstructure:"token"`
	// User is sent as X-SLURM-USER-NAME.
	User string `mapstructure:"user"`
	// APIVersion is the OpenAPI plugin version in the path. Default
	// "v0.0.40" (Slurm 23.11 to 24.11); v0.0.39 or later is required.
	APIVersion string `mapstructure:"api_version"`
}

// BreakerConfig bounds the share of nodes drained by this exporter.
type BreakerConfig struct {
	// MaxShare of all Slurm nodes this exporter may drain within Window;
	// at least one node is always allowed. Default 0.1.
	MaxShare float64 `mapstructure:"max_share"`
	// Window over which drains are counted (by their Slurm reason time).
	// Default 1h.
	Window time.Duration `mapstructure:"window"`
}

// NewDefaultConfig returns the defaults; the exporter embeds it.
func NewDefaultConfig() Config {
	return Config{
		ScontrolPath: "scontrol",
		ReasonPrefix: DefaultReasonPrefix,
		Timeout:      10 * time.Second,
		Slurmrestd:   RestConfig{APIVersion: "v0.0.40"},
		Breaker:      BreakerConfig{MaxShare: 0.1, Window: time.Hour},
	}
}

var apiVersionPattern = regexp.MustCompile(`^v0\.0\.([0-9]{1,4})$`)

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Slurmrestd.URL == "" && strings.TrimSpace(c.ScontrolPath) == "" {
		errs = append(errs, errors.New("slurm: scontrol_path or slurmrestd.url is required"))
	}
	if c.Slurmrestd.URL != "" {
		if err := validateRestURL(c.Slurmrestd.URL); err != nil {
			errs = append(errs, err)
		}
		m := apiVersionPattern.FindStringSubmatch(c.Slurmrestd.APIVersion)
		if m == nil {
			errs = append(errs, fmt.Errorf("slurm: slurmrestd.api_version %q is not of the form v0.0.N", c.Slurmrestd.APIVersion))
		} else if n, _ := strconv.Atoi(m[1]); n < minWritableAPIVersion {
			errs = append(errs, fmt.Errorf("slurm: slurmrestd.api_version %s cannot update nodes (Slurm 22.05 and older); use v0.0.39 or later, or scontrol_path", c.Slurmrestd.APIVersion))
		}
		if c.Slurmrestd.Token == "" {
			errs = append(errs, errors.New("slurm: slurmrestd.token is required with slurmrestd.url"))
		}
	}
	prefix := strings.TrimSpace(c.ReasonPrefix)
	if prefix == "" {
		errs = append(errs, errors.New("slurm: reason_prefix must not be empty: it is how this exporter knows its own drains"))
	} else if strings.ContainsAny(prefix, "\n\r\"") {
		errs = append(errs, errors.New("slurm: reason_prefix must not contain quotes or line breaks"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("slurm: timeout must be positive"))
	}
	if !(c.Breaker.MaxShare > 0 && c.Breaker.MaxShare <= 1) {
		errs = append(errs, fmt.Errorf("slurm: breaker.max_share %v must be in (0, 1]", c.Breaker.MaxShare))
	}
	if c.Breaker.Window <= 0 {
		errs = append(errs, errors.New("slurm: breaker.window must be positive"))
	}
	return errors.Join(errs...)
}

func validateRestURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("slurm: slurmrestd.url: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("slurm: slurmrestd.url %q has no host", raw)
		}
	case "unix":
		if u.Path == "" {
			return fmt.Errorf("slurm: slurmrestd.url %q has no socket path (unix:///path)", raw)
		}
	default:
		return fmt.Errorf("slurm: slurmrestd.url %q: scheme must be http, https or unix", raw)
	}
	return nil
}
