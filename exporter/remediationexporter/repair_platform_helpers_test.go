//go:build envtest || slurm

package remediationexporter

import (
	"testing"

	"go.opentelemetry.io/collector/exporter"
)

// withAgentClient makes the factory's agent client agent for this test.
func withAgentClient(t *testing.T, agent nodeAgent) {
	old := newAgentClient
	newAgentClient = func(RepairAgentConfig, exporter.Settings) (nodeAgent, error) { return agent, nil }
	t.Cleanup(func() { newAgentClient = old })
}
