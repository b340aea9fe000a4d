package invariant

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"gopkg.in/yaml.v3"
)

// envRef is a ${env:NAME} or ${env:NAME:-default} reference of a config.
var envRef = regexp.MustCompile(`\$\{env:([A-Za-z0-9_]+)(?::-([^}]*))?\}`)

// shipped is a collector config of distributions/, as the collector
// reads it with the environment set only to env: every other reference
// takes its default.
type shipped map[string]any

// readShipped reads distributions/<dist>/config.yaml.
func readShipped(dist string, env map[string]string) (shipped, error) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "distributions", dist, "config.yaml"))
	if err != nil {
		return nil, err
	}
	expanded := envRef.ReplaceAllFunc(raw, func(ref []byte) []byte {
		m := envRef.FindSubmatch(ref)
		if v, ok := env[string(m[1])]; ok {
			return []byte(v)
		}
		return m[2]
	})
	var cfg map[string]any // not shipped: yaml.v3 would make every nested map one
	if err := yaml.Unmarshal(expanded, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", dist, err)
	}
	return shipped(cfg), nil
}

// section is the configuration of component id under kind (processors,
// connectors, extensions), nil when it has none (all defaults).
func (s shipped) section(kind, id string) (map[string]any, error) {
	all, _ := s[kind].(map[string]any)
	sec, ok := all[id]
	if !ok {
		return nil, fmt.Errorf("%s has no %s", kind, id)
	}
	m, _ := sec.(map[string]any)
	return m, nil
}

// load unmarshals component id's section over cfg (its factory's default)
// as the collector does, and validates it.
func (s shipped) load(kind, id string, cfg component.Config) error {
	sec, err := s.section(kind, id)
	if err != nil {
		return err
	}
	if err := confmap.NewFromStringMap(sec).Unmarshal(cfg); err != nil {
		return fmt.Errorf("%s %s: %w", kind, id, err)
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%s %s: %w", kind, id, err)
		}
	}
	return nil
}

// pipeline is the processors and exporters of pipeline name.
func (s shipped) pipeline(name string) (processors, exporters []string) {
	service, _ := s["service"].(map[string]any)
	pipelines, _ := service["pipelines"].(map[string]any)
	p, _ := pipelines[name].(map[string]any)
	list := func(key string) []string {
		var out []string
		items, _ := p[key].([]any)
		for _, it := range items {
			out = append(out, fmt.Sprint(it))
		}
		return out
	}
	return list("processors"), list("exporters")
}

// The agent runs as node-own: its provenance stamps that name.
var agentEnv = map[string]string{"OTELCOL_GPU_HOST_NAME": ownHost}

var (
	shippedOnce              sync.Once
	agentConfig, gatewayConf shipped
	shippedErr               error
)

// configs reads both shipped configs once per process (a fuzz worker runs
// many cases).
func configs() (agent, gateway shipped, err error) {
	shippedOnce.Do(func() {
		if agentConfig, shippedErr = readShipped("agent", agentEnv); shippedErr != nil {
			return
		}
		gatewayConf, shippedErr = readShipped("gateway", nil)
	})
	return agentConfig, gatewayConf, shippedErr
}
