package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
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
	// QuarantineCapTripsBreaker trips the platform's breaker when
	// max_quarantined_fraction refuses a fault, so that quarantining stops
	// and a human decides (README.md, "Safety rails"). Default true.
	QuarantineCapTripsBreaker bool `mapstructure:"quarantine_cap_trips_breaker"`
	// Decisions is the durable decision log shared by the replicas (Kafka);
	// no brokers: off. README.md, "Replicas and the decision log".
	Decisions DecisionsConfig `mapstructure:"decisions"`
	// Console is the component ID of a fault console extension (for
	// example faultconsole): the exporter shows it every fault record it
	// decided and what it did, and offers it its controls (list and
	// release quarantined nodes, read and reset the breaker, acknowledge a
	// fault), each through the same rails and audit as its own decisions.
	// Empty: none.
	Console string `mapstructure:"console"`
	// Repair is the repair loop (repairconfig.go); off by default.
	Repair RepairConfig `mapstructure:"repair"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// KubernetesConfig turns on the Kubernetes platform (internal/k8s: cordon,
// taint, node condition, eviction, the breaker ConfigMap and the Lease).
type KubernetesConfig struct {
	Enabled    bool `mapstructure:"enabled"`
	k8s.Config `mapstructure:",squash"`
	// LeaseEnabled is kubernetes.lease.enabled (default true): replicas
	// elect the one that acts with the Lease. Off where something else
	// elects it (the gpu_faults consumer group). Read by Unmarshal, as
	// k8s.LeaseConfig has no such key.
	LeaseEnabled bool `mapstructure:"-"`
}

// Unmarshal reads lease.enabled, then the rest of the block as usual.
func (kc *KubernetesConfig) Unmarshal(conf *confmap.Conf) error {
	if conf == nil {
		return nil
	}
	raw := conf.ToStringMap()
	if lease, ok := raw["lease"].(map[string]any); ok {
		if v, ok := lease["enabled"]; ok {
			b, isBool := v.(bool)
			if str, isStr := v.(string); isStr { // an unquoted ${env:...}
				var err error
				b, err = strconv.ParseBool(str)
				isBool = err == nil
			}
			if !isBool {
				return fmt.Errorf("lease.enabled: %v is not a bool", v)
			}
			kc.LeaseEnabled = b
			rest := make(map[string]any, len(lease))
			for k, v := range lease {
				if k != "enabled" {
					rest[k] = v
				}
			}
			raw["lease"] = rest
		}
	}
	type plain KubernetesConfig // without this method: no recursion
	return confmap.NewFromStringMap(raw).Unmarshal((*plain)(kc))
}

// DecisionsConfig is the decision log: a Kafka topic every replica reads
// from its beginning, and appends each decision to before auditing it, so
// a record redelivered to another replica after a failover is not decided
// twice.
type DecisionsConfig struct {
	// KafkaClientConfig: brokers (none: the log is off), TLS, SASL PLAIN or
	// SCRAM; contrib's configkafka.ClientConfig.
	KafkaClientConfig `mapstructure:",squash"`
	// Topic of the log. Default gpu_fault_decisions; create it with
	// cleanup.policy=delete and retention.ms = retention.
	Topic string `mapstructure:"topic"`
	// Retention: how long a decided key is remembered; set it to the
	// topic's retention.ms. Default 168h.
	Retention time.Duration `mapstructure:"retention"`
	// MaxKeys bounds the decided keys held in memory; past it the oldest
	// are forgotten (and logged). Default 1000000.
	MaxKeys int `mapstructure:"max_keys"`
	// Timeout bounds the catch-up and the publish of one decision. Default
	// 10s; on expiry the record is refused (retryable) and redelivered.
	Timeout time.Duration `mapstructure:"timeout"`
}

// KafkaClientConfig is configkafka.ClientConfig as a type of its own: the
// collector's validation would call configkafka's Validate, which refuses
// the empty broker list that here means "off". Validate below calls it
// when the log is on.
type KafkaClientConfig configkafka.ClientConfig

// Enabled: brokers configured.
func (d *DecisionsConfig) Enabled() bool { return len(d.Brokers) > 0 }

// validate checks the log's settings when it is on. Not Validate: Config's
// Validate calls it, once, with the key prefixed.
func (d *DecisionsConfig) validate() error {
	if !d.Enabled() {
		return nil
	}
	var errs []error
	if err := configkafka.ClientConfig(d.KafkaClientConfig).Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, kafkaclient.Unsupported(configkafka.ClientConfig(d.KafkaClientConfig))...)
	if d.Topic == "" {
		errs = append(errs, errors.New("topic must not be empty"))
	}
	if d.Retention <= 0 {
		errs = append(errs, fmt.Errorf("retention %v: must be positive", d.Retention))
	}
	if d.MaxKeys < 1 {
		errs = append(errs, fmt.Errorf("max_keys %d: must be at least 1", d.MaxKeys))
	}
	if d.Timeout < time.Second { // franz-go's least delivery timeout
		errs = append(errs, fmt.Errorf("timeout %v: must be at least 1s", d.Timeout))
	}
	return errors.Join(errs...)
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
	if cfg.Decisions.Enabled() && cfg.Kubernetes.Enabled && cfg.Kubernetes.LeaseEnabled {
		// Two elections that can disagree: a Lease follower owning the
		// gpu_faults partitions would skip faults the receiver then commits.
		errs = append(errs, errors.New("decisions.brokers and kubernetes.lease.enabled: the decision log is for a remediation fed by the single-owner gpu_faults consumer group, which elects the acting replica; set kubernetes.lease.enabled: false"))
	}
	if err := cfg.Decisions.validate(); err != nil {
		errs = append(errs, fmt.Errorf("decisions: %w", err))
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
	errs = append(errs, cfg.Repair.validate(cfg.DryRun))
	if _, err := cfg.consoleID(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, cfg.Webhook.Validate(), cfg.Policy.Validate())
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
