//go:build slurm

package remediationexporter

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The fault console's controls against a real slurmctld: a drained node is
// listed and resumed through the controller; the drain breaker (its state
// file) trips, is read and reset through the controller, and the exporter
// drains again.
func TestSlurmConsoleControls(t *testing.T) {
	c := slurmtest.Start(t, 10)
	_, url := newSignedHook(t)
	cfg := slurmActingConfig(t, c, url)
	cfg.Slurm.Breaker.MaxShare = 0.1 // 10 nodes: a budget of one
	cfg.MaxQuarantinedFraction = 1
	cfg.Console = testConsoleID.String()
	rc := &recordingConsole{}
	exp := startFromFactoryOn(t, cfg, extHost{testConsoleID: rc})
	ctl := rc.ctl(t)
	ctx := context.Background()

	first := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node1", fault.StateOpen)
	consumeSlurm(t, exp, first)
	require.Equal(t, map[string]string{"gpu-node1": "otelcol-gpu: gpu.memory.dbe " + first.ID}, c.DrainReasons())
	nodes, err := ctl.Quarantined(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Equal(t, "gpu-node1", nodes[0].Node)
	assert.Equal(t, []string{"drain"}, nodes[0].Actions)

	second := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node2", fault.StateOpen)
	consumeSlurm(t, exp, second)
	assert.NotContains(t, c.DrainReasons(), "gpu-node2", "the breaker refused it")
	b, err := ctl.Breaker(ctx)
	require.NoError(t, err)
	assert.True(t, b.Tripped)
	assert.Equal(t, 1, b.Used)
	assert.Equal(t, 1, b.Budget)
	assert.Equal(t, cfg.Slurm.Breaker.Window, b.Window)

	detail, err := ctl.Release(ctx, "gpu-node1", operator)
	require.NoError(t, err)
	assert.Contains(t, detail, "applied")
	c.WaitFor("gpu-node1 resumed", func() bool {
		_, drained := c.DrainReasons()["gpu-node1"]
		return !drained && strings.HasPrefix(slurmNodeState(c, "gpu-node1"), "idle")
	})
	rel := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "gpu-node1"))
	require.Len(t, rel, 1)
	assert.Equal(t, "alice", rel[0].Operator)

	require.NoError(t, ctl.ResetBreaker(ctx, operator))
	raw, err := os.ReadFile(cfg.Slurm.StateFile)
	require.NoError(t, err)
	var st struct {
		Tripped bool `json:"tripped"`
	}
	require.NoError(t, json.Unmarshal(raw, &st))
	assert.False(t, st.Tripped, "the state file reads closed")
	assert.Len(t, auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepBreaker && e.Event == breakerEventReset && e.Decision == audit.DecisionActed && e.Operator == "alice"
	}), 1)

	third := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node3", fault.StateOpen)
	consumeSlurm(t, exp, third)
	assert.Contains(t, c.DrainReasons(), "gpu-node3", "draining resumed after the reset")
}
