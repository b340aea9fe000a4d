//go:build slurm

// The whole exporter, built by its factory with slurm enabled, against a
// real slurmctld and slurmd daemons (internal/slurm/slurmtest):
//
//	go test -tags slurm -run TestSlurmExporter -v ./exporter/remediationexporter/
package remediationexporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// slurmNodeState is the node's state as sinfo prints it (idle, drained,
// draining, idle*, ...).
func slurmNodeState(c *slurmtest.Cluster, node string) string {
	return strings.TrimSpace(c.Run("sinfo", "-h", "-n", node, "-o", "%T"))
}

func TestSlurmExporter(t *testing.T) {
	c := slurmtest.Start(t, 3)
	// The exporter runs scontrol like an operator would, with SLURM_CONF
	// pointing at the test cluster.
	t.Setenv("SLURM_CONF", c.Conf)

	hook, url := newSignedHook(t)
	cfg := actingConfig(t, url)
	cfg.Slurm.Enabled = true
	cfg.Slurm.Breaker.MaxShare = 1
	cfg.VerificationWindow = 200 * time.Millisecond
	exp := startFromFactory(t, cfg)
	ctx := context.Background()

	// A DBE drains gpu-node1 with our reason.
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node1", fault.StateOpen)
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(CorrelatorScopeName, dbe)))
	reasons := c.DrainReasons()
	require.Contains(t, reasons, "gpu-node1", "drained")
	assert.True(t, strings.HasPrefix(reasons["gpu-node1"], "otelcol-gpu:"), reasons["gpu-node1"])
	assert.Equal(t, "otelcol-gpu: gpu.memory.dbe "+dbe.ID, reasons["gpu-node1"])
	assert.Contains(t, c.NodeLine("gpu-node1"), "DRAIN")
	acted := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, "gpu-node1"))
	require.Len(t, acted, 1)
	assert.Equal(t, "slurm", acted[0].Platform)
	assert.Equal(t, []string{"drain"}, acted[0].Actions)
	d := hook.deliveries()
	require.Len(t, d, 1)
	assert.Equal(t, "page", d[0].payload.Route)
	assert.Equal(t, "slurm", d[0].payload.Decision.Platform)

	// An NVLink fault drains gpu-node2.
	nvlink := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "gpu-node2", fault.StateOpen)
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(CorrelatorScopeName, nvlink)))
	require.Contains(t, c.DrainReasons(), "gpu-node2")

	// The DBE resolves: it waits for a human, decided at once.
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(CorrelatorScopeName, withState(dbe, fault.StateResolved))))
	held := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionSkipped, "gpu-node1"))
	require.Len(t, held, 1)
	assert.Contains(t, held[0].Reason, "waits for a human")

	// The NVLink fault resolves: RESUME after the verification window.
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(CorrelatorScopeName, withState(nvlink, fault.StateResolved))))
	c.WaitFor("gpu-node2 resumed", func() bool {
		_, drained := c.DrainReasons()["gpu-node2"]
		return !drained && strings.HasPrefix(slurmNodeState(c, "gpu-node2"), "idle")
	})
	c.WaitFor("release audited", func() bool {
		return len(auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "gpu-node2"))) == 1
	})

	// gpu-node1's DBE resolved before gpu-node2's fault, whose window has
	// passed: gpu-node1 is still drained, with our reason.
	assert.Equal(t, "otelcol-gpu: gpu.memory.dbe "+dbe.ID, c.DrainReasons()["gpu-node1"])
	assert.Empty(t, auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "gpu-node1")))
	assert.Equal(t, "idle", slurmNodeState(c, "gpu-node3"), "an unrelated node is untouched")
	assert.Zero(t, hook.badSignatures())
}
