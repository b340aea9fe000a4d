//go:build slurm

// The whole exporter, built by its factory with slurm enabled, against a
// real slurmctld and slurmd daemons (internal/slurm/slurmtest):
//
//	go test -tags slurm -run TestSlurmExporter -v ./exporter/remediationexporter/
package remediationexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
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
	cfg.MaxQuarantinedFraction = 1 // the cap has its own test (rails_slurm_test.go)
	cfg.VerificationWindow = 200 * time.Millisecond
	exp := startFromFactory(t, cfg)
	ctx := context.Background()

	// A DBE drains gpu-node1 with our reason.
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node1", fault.StateOpen)
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, dbe)))
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
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, nvlink)))
	require.Contains(t, c.DrainReasons(), "gpu-node2")

	// The DBE resolves: it waits for a human, decided at once.
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, withState(dbe, fault.StateResolved))))
	held := auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionSkipped, "gpu-node1"))
	require.Len(t, held, 1)
	assert.Contains(t, held[0].Reason, "waits for a human")

	// The NVLink fault resolves: RESUME after the verification window.
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, withState(nvlink, fault.StateResolved))))
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

// nvlinkOnGPU is an NVLink fault on one GPU of node, with its own fault id.
func nvlinkOnGPU(node string, gpu int) fault.Record {
	r := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, node, fault.StateOpen)
	r.GPUUUID = fmt.Sprintf("GPU-%s-%d", node, gpu)
	r.Entity.Key = r.GPUUUID
	r.ID = r.ComputeID(fault.DefaultBucket)
	return r
}

// A node drained for two faults is resumed once both resolve, whichever
// of the two drained it: the reason names only the first, and the release
// must still recognise the drain as ours (a regression: it asked about the
// last fault id only, heard "not ours" and left the node drained).
func TestSlurmExporterTwoFaultsOneNode(t *testing.T) {
	c := slurmtest.Start(t, 2)
	t.Setenv("SLURM_CONF", c.Conf)

	_, url := newSignedHook(t)
	cfg := actingConfig(t, url)
	cfg.Slurm.Enabled = true
	cfg.Slurm.Breaker.MaxShare = 1
	cfg.MaxQuarantinedFraction = 1 // the cap has its own test (rails_slurm_test.go)
	cfg.VerificationWindow = 100 * time.Millisecond
	exp := startFromFactory(t, cfg)
	ctx := context.Background()

	for i, node := range c.Nodes {
		a, b := nvlinkOnGPU(node, 5), nvlinkOnGPU(node, 6)
		// Drain under the id that sorts first on one node and under the
		// one that sorts last on the other.
		if (a.ID > b.ID) == (i == 0) {
			a, b = b, a
		}
		require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, a)))
		require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, b)))
		reason := c.DrainReasons()[node]
		require.Equal(t, "otelcol-gpu: nvlink.degraded "+a.ID, reason, "drained under the first fault only")

		require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, withState(a, fault.StateResolved))))
		require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, withState(b, fault.StateResolved))))
		c.WaitFor(node+" resumed", func() bool {
			_, drained := c.DrainReasons()[node]
			return !drained && strings.HasPrefix(slurmNodeState(c, node), "idle")
		})
		var released []audit.Entry
		c.WaitFor("release audited", func() bool {
			released = auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, node))
			return len(released) == 1
		})
		assert.ElementsMatch(t, []string{a.ID, b.ID}, strings.Split(released[0].FaultID, ","))
	}
	assert.Empty(t, auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepRelease && strings.Contains(e.Reason, string(actuator.NotOurs))
	}))
}
