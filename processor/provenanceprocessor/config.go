package provenanceprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/component"
)

// Config is the configuration of the provenance processor.
type Config struct {
	// HostName is the host.name stamped on everything: the Kubernetes node
	// name from the downward API in the shipped DaemonSet. Empty: resolved
	// as the agent's receivers do (internal/hostname), the machine's.
	HostName string `mapstructure:"host_name"`
	// NodeState names the nodestate extension whose GPU inventory gpu.uuid
	// and gpu.index claims are checked against. Unset: no GPU claim is
	// accepted.
	NodeState *component.ID `mapstructure:"nodestate"`
	// BindToAuth takes the node from each request's authentication (the
	// nodeauth extension's node, client.Info's Auth) instead of host_name:
	// the central of the small-cluster mode (bind.go, README.md).
	BindToAuth bool `mapstructure:"bind_to_auth"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the host name: the stamp must match what the agent's
// receivers write, and a stray space would make every node look unknown.
func (c *Config) Validate() error {
	if c.HostName != strings.TrimSpace(c.HostName) {
		return fmt.Errorf("host_name %q: leading or trailing white space", c.HostName)
	}
	if len(c.HostName) > 253 {
		return fmt.Errorf("host_name: %d characters, at most 253", len(c.HostName))
	}
	return c.validateBind()
}
