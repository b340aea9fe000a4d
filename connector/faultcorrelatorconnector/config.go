package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"errors"
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Mode selects which inputs the correlator reads.
type Mode string

// Modes.
const (
	// ModeAgent: node-local rules over this node's metrics and logs; spans
	// are ignored and node.silent is not tracked (a node cannot see itself
	// go silent). A correlator in this mode that is an exporter of a traces
	// pipeline fails to start, naming the mode and what to change.
	ModeAgent Mode = "agent"
	// ModeGateway adds spans (straggler verdicts, the signals of rank step
	// spans) and the node.heartbeat signal behind node.silent, observed for
	// hosts that run ranks.
	ModeGateway Mode = "gateway"
)

// Config is the configuration of the faultcorrelator connector.
type Config struct {
	// Mode is agent (default) or gateway.
	Mode Mode `mapstructure:"mode"`
	// Rules are merged over the shipped defaults (rules.Default) by name:
	// either a YAML document string ("rules: [...]") or a list of rules.
	Rules any `mapstructure:"rules"`
	// EvaluationInterval between rule evaluations. Default 1s: a hardware
	// fault opens within one scrape interval plus this.
	EvaluationInterval time.Duration `mapstructure:"evaluation_interval"`
	// FaultIDBucket is the onset bucket of fault ids. Default 5m.
	FaultIDBucket time.Duration `mapstructure:"fault_id_bucket"`
	// ResolveAfter: an open fault whose rule has not matched for this long
	// is resolved. Default 5m.
	ResolveAfter time.Duration `mapstructure:"resolve_after"`
	// MaxEntities bounds the entities tracked. Default 100000.
	MaxEntities int `mapstructure:"max_entities"`
	// MaxSamplesPerSeries bounds the samples per entity and signal. Default 256.
	MaxSamplesPerSeries int `mapstructure:"max_samples_per_series"`
	// MaxOpenFaults bounds the faults open at once. Default 10000.
	MaxOpenFaults int `mapstructure:"max_open_faults"`
	// MaxOpenFaultsPerNode bounds the faults open at once on one node (the
	// fault's host.name; a fault without one, such as a job's, counts under
	// its entity), so that one node's flood cannot take the room of the
	// others. Default 64.
	MaxOpenFaultsPerNode int `mapstructure:"max_open_faults_per_node"`
	// MaxOpenFaultsPerSource bounds the faults open at once from one source:
	// one fault type (for gpu.xid, one XID code) on one node, so that a
	// flood of one kind (low-severity XIDs on made-up GPUs) cannot fill the
	// node's room for the others (a DBE). Default 16.
	//
	// When a cap is full, a new fault more severe than the least severe
	// open fault under that cap takes its place (that fault is no longer
	// tracked: evicted, without a record); otherwise the new fault is
	// refused. Both are logged and counted.
	MaxOpenFaultsPerSource int `mapstructure:"max_open_faults_per_source"`
	// IncidentGap groups a node's faults into incidents for the escalation
	// rule (node_repeated_faults counts fault.opened): a fault whose onset
	// lies within IncidentGap of one already counted for its node belongs
	// to the same incident and is not counted again, so that one incident
	// seen as several faults (the eight ranks of a node slow on one link, a
	// DBE then the NCCL timeout it causes) is no "node that keeps
	// faulting". 0 counts every fault. Default 10m.
	IncidentGap time.Duration `mapstructure:"incident_gap"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration; messages name the key and the value.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Mode != ModeAgent && cfg.Mode != ModeGateway {
		errs = append(errs, fmt.Errorf("mode: must be %q or %q, got %q", ModeAgent, ModeGateway, cfg.Mode))
	}
	if err := interval.Check("evaluation_interval", cfg.EvaluationInterval, false); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		key string
		val time.Duration
	}{{"resolve_after", cfg.ResolveAfter}} {
		if d.val <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %s", d.key, d.val))
		}
	}
	if cfg.FaultIDBucket < 0 {
		errs = append(errs, fmt.Errorf("fault_id_bucket: must not be negative, got %s", cfg.FaultIDBucket))
	}
	if cfg.IncidentGap < 0 {
		errs = append(errs, fmt.Errorf("incident_gap: must not be negative, got %s", cfg.IncidentGap))
	}
	for _, n := range []struct {
		key string
		val int
	}{{"max_entities", cfg.MaxEntities}, {"max_samples_per_series", cfg.MaxSamplesPerSeries}, {"max_open_faults", cfg.MaxOpenFaults},
		{"max_open_faults_per_node", cfg.MaxOpenFaultsPerNode}, {"max_open_faults_per_source", cfg.MaxOpenFaultsPerSource}} {
		if n.val <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be greater than 0, got %d", n.key, n.val))
		}
	}
	if _, err := cfg.loadRules(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// loadRules merges the configured rules over the defaults and checks that
// every rule reads only signals some component emits.
func (cfg *Config) loadRules() ([]rules.Rule, error) {
	rs, err := cfg.mergeRules()
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if err := r.ValidateSignals(emitted); err != nil {
			return nil, fmt.Errorf("rules: %w", err)
		}
	}
	return rs, nil
}

// emitted reports whether a component emits signal (internal/semconv's
// registry of the signals rules may read).
func emitted(signal string) bool {
	return len(semconv.SignalEmitters(signal)) > 0
}

// mergeRules merges the configured rules over the defaults.
func (cfg *Config) mergeRules() ([]rules.Rule, error) {
	defaults, err := rules.Default()
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	var doc []byte
	switch r := cfg.Rules.(type) {
	case nil:
		return defaults, nil
	case string:
		doc = []byte(r)
	case []any:
		// A list from the collector's YAML: re-encode it as the rules file
		// format so that rules.Load checks it (unknown fields included).
		doc, err = yaml.Marshal(map[string]any{"rules": r})
		if err != nil {
			return nil, fmt.Errorf("rules: encoding the list: %w", err)
		}
	default:
		return nil, fmt.Errorf("rules: must be a YAML string or a list of rules, got %T", cfg.Rules)
	}
	rs, err := rules.Load(doc, defaults)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return rs, nil
}
