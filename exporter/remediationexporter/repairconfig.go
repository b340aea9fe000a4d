package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configtls"
)

// RepairConfig is the repair loop (README.md, "Repair loop"): a node
// quarantined for a fault whose policy rule names a repair ladder is
// drained, repaired, verified by its agent and returned only once the
// verification passes; past the ladder it waits for a human (RMA review).
type RepairConfig struct {
	// Enabled turns the loop on. Default false: repairs are opt-in, and
	// without the loop the policy's holds and return_to_service apply as
	// before.
	Enabled bool `mapstructure:"enabled"`
	// PollInterval is how often the loop advances each node. Default 10s.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// StepTimeouts bound each wait; past one the loop escalates to the
	// next repair (or to rma).
	StepTimeouts StepTimeouts `mapstructure:"step_timeouts"`
	// Breaker bounds the repairs requested per window.
	Breaker RepairBreakerConfig `mapstructure:"breaker"`
	// Agent is how the exporter reaches the node agents' repair API.
	Agent RepairAgentConfig `mapstructure:"agent"`
	// RequireConfirmation: before the first repair the node's agent must
	// confirm the fault from its own hardware signals (a fault forged
	// about the node is not confirmed: nothing is repaired, the node waits
	// for a human). Default true; an agent client that cannot ask holds
	// every repair.
	RequireConfirmation bool `mapstructure:"require_confirmation"`
}

// StepTimeouts are the bounds of the loop's waits.
type StepTimeouts struct {
	// Drain: quarantined until the node (or the fault's GPU) drained, and
	// drained until the repair could be requested. Default 4h.
	Drain time.Duration `mapstructure:"drain"`
	// Repair: a GPU reset, requested until done. Default 15m.
	Repair time.Duration `mapstructure:"repair"`
	// Reboot: a reboot, requested until done (a new boot id). Default 1h.
	Reboot time.Duration `mapstructure:"reboot"`
	// Verify: repaired until the verification passed. Default 2h.
	Verify time.Duration `mapstructure:"verify"`
}

// RepairBreakerConfig is the repair breaker: at most MaxRepairs repair
// requests in any Window, counted by this exporter (restored from its
// audit file at start). Past it a repair waits (its step's timeout runs).
type RepairBreakerConfig struct {
	MaxRepairs int           `mapstructure:"max_repairs"` // default 10
	Window     time.Duration `mapstructure:"window"`      // default 1h
}

// RepairAgentConfig reaches the node agents' repair API (internal/repair).
type RepairAgentConfig struct {
	// Endpoint is the agent's URL, {node} replaced with the node's name.
	// Default https://{node}:8790.
	Endpoint string `mapstructure:"endpoint"`
	// PrivateKeyFile signs every request: a PEM PKCS#8 Ed25519 key
	// (openssl genpkey -algorithm ed25519); the agents hold its public key.
	// Required with the loop on, unless dry_run.
	PrivateKeyFile string `mapstructure:"private_key_file"`
	// TLS verifies the agents' certificates (ca_file for a private CA,
	// server_name_override, a client certificate): the collector's
	// configtls client settings. Default: the system roots.
	TLS configtls.ClientConfig `mapstructure:"tls"`
}

func defaultRepairConfig() RepairConfig {
	return RepairConfig{
		PollInterval: 10 * time.Second,
		StepTimeouts: StepTimeouts{Drain: 4 * time.Hour, Repair: 15 * time.Minute, Reboot: time.Hour, Verify: 2 * time.Hour},
		Breaker:      RepairBreakerConfig{MaxRepairs: 10, Window: time.Hour},
		Agent:        RepairAgentConfig{Endpoint: "https://{node}:8790"},

		RequireConfirmation: true,
	}
}

// validate checks the section; every error names its key (repair.*).
func (rc *RepairConfig) validate(dryRun bool) error {
	if !rc.Enabled {
		return nil
	}
	var errs []error
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("repair.%s %v: must be positive", key, d))
		}
	}
	positive("poll_interval", rc.PollInterval)
	positive("step_timeouts.drain", rc.StepTimeouts.Drain)
	positive("step_timeouts.repair", rc.StepTimeouts.Repair)
	positive("step_timeouts.reboot", rc.StepTimeouts.Reboot)
	positive("step_timeouts.verify", rc.StepTimeouts.Verify)
	positive("breaker.window", rc.Breaker.Window)
	if rc.Breaker.MaxRepairs < 1 {
		errs = append(errs, fmt.Errorf("repair.breaker.max_repairs %d: must be at least 1", rc.Breaker.MaxRepairs))
	}
	if !strings.HasPrefix(rc.Agent.Endpoint, "https://") || strings.Count(rc.Agent.Endpoint, "{node}") != 1 {
		errs = append(errs, fmt.Errorf("repair.agent.endpoint %q: want an https:// URL with {node} in its host once", rc.Agent.Endpoint))
	}
	if err := rc.Agent.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("repair.agent.tls: %w", err))
	}
	if rc.Agent.PrivateKeyFile == "" && !dryRun {
		errs = append(errs, errors.New("repair.agent.private_key_file: required to sign repair requests (or dry_run: true)"))
	}
	return errors.Join(errs...)
}
