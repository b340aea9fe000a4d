package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"errors"
	"fmt"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
)

// Config is the configuration of the remediation exporter. README.md shows
// every key with its default.
type Config struct {
	// DryRun logs (and audits) the exact action the exporter would take and
	// calls no platform and no webhook. Default true: acting is opt-in.
	DryRun bool `mapstructure:"dry_run"`
	// Policy maps fault type and severity to actions.
	Policy policy.Config `mapstructure:"policy"`
	// Kubernetes and Slurm select and configure the platform; at most one
	// is enabled. Neither: webhook only.
	Kubernetes KubernetesConfig `mapstructure:"kubernetes"`
	Slurm      SlurmConfig      `mapstructure:"slurm"`
	// Webhook posts records and decisions, signed; no endpoint: disabled.
	// https:// only unless webhook.insecure.
	Webhook webhook.Config `mapstructure:"webhook"`
	// Cooldown: after the exporter returned a node to service it does not
	// quarantine it again for this long (flapping). Default 30m.
	Cooldown time.Duration `mapstructure:"cooldown"`
	// VerificationWindow is how long a node stays quarantined after its
	// last fault resolved before the exporter returns it to service, where
	// the policy allows; a new fault on the node within it cancels the
	// return. Default 30m.
	VerificationWindow time.Duration `mapstructure:"verification_window"`
	// AuditFile receives one JSON line per decision (append-only, synced
	// per line); Start replays it to remember what earlier lives did.
	// Empty: decisions are only logged, and a restart forgets them.
	AuditFile string `mapstructure:"audit_file"`
	// MaxAttempts bounds the calls per platform action on errors (API
	// server down, conflicts). Default 3.
	MaxAttempts int `mapstructure:"max_attempts"`
	// Backoff between attempts, for the platform and the webhook.
	Backoff BackoffConfig `mapstructure:"backoff"`
	// MaxQuarantinedFraction caps the share of GPU nodes quarantined by
	// this exporter at once (0 < x <= 1; at least one node), counted from
	// the platform's own marks, so it holds across restarts, replicas and
	// breaker windows. Default 0.1.
	MaxQuarantinedFraction float64 `mapstructure:"max_quarantined_fraction"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// KubernetesConfig turns on the Kubernetes platform (internal/k8s: cordon,
// taint, node condition, eviction, the breaker ConfigMap and the Lease).
type KubernetesConfig struct {
	Enabled    bool `mapstructure:"enabled"`
	k8s.Config `mapstructure:",squash"`
}

// SlurmConfig turns on the Slurm platform (internal/slurm: DRAIN/RESUME
// through scontrol or slurmrestd).
type SlurmConfig struct {
	Enabled      bool `mapstructure:"enabled"`
	slurm.Config `mapstructure:",squash"`
}

// BackoffConfig is an exponential backoff: Initial, doubled per attempt, at
// most Max.
type BackoffConfig struct {
	// Initial wait after the first failure. Default 1s.
	Initial time.Duration `mapstructure:"initial"`
	// Max wait between attempts. Default 30s.
	Max time.Duration `mapstructure:"max"`
}

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Kubernetes.Enabled && cfg.Slurm.Enabled {
		errs = append(errs, errors.New("kubernetes and slurm cannot both be enabled: run one exporter per platform"))
	}
	if cfg.Kubernetes.Enabled {
		if err := cfg.Kubernetes.Config.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("kubernetes: %w", err))
		}
	}
	if cfg.Slurm.Enabled {
		if err := cfg.Slurm.Config.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("slurm: %w", err))
		}
	}
	if cfg.Cooldown < 0 {
		errs = append(errs, errors.New("cooldown must not be negative"))
	}
	if cfg.VerificationWindow < 0 {
		errs = append(errs, errors.New("verification_window must not be negative"))
	}
	if !(cfg.MaxQuarantinedFraction > 0 && cfg.MaxQuarantinedFraction <= 1) {
		errs = append(errs, fmt.Errorf("max_quarantined_fraction %v: must be in (0, 1]", cfg.MaxQuarantinedFraction))
	}
	if cfg.MaxAttempts < 1 {
		errs = append(errs, errors.New("max_attempts must be at least 1"))
	}
	if cfg.Backoff.Initial <= 0 {
		errs = append(errs, errors.New("backoff.initial must be positive"))
	}
	if cfg.Backoff.Max < cfg.Backoff.Initial {
		errs = append(errs, errors.New("backoff.max must be at least backoff.initial"))
	}
	errs = append(errs, cfg.Webhook.Validate(), cfg.Policy.Validate())
	return errors.Join(errs...)
}
