//go:build slurm

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
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// A human who resumes a node we drained and drains it again, here with our
// reason copied word for word, keeps their drain when the fault resolves
// (internal/slurm/drains.go); a node no one touched is resumed.
func TestSlurmReleaseLeavesHumanDrain(t *testing.T) {
	c := slurmtest.Start(t, 2)
	t.Setenv("SLURM_CONF", c.Conf)
	_, url := newSignedHook(t)
	cfg := actingConfig(t, url)
	cfg.Slurm.Enabled = true
	cfg.Slurm.Breaker.MaxShare = 1
	cfg.MaxQuarantinedFraction = 1
	cfg.VerificationWindow = 100 * time.Millisecond
	exp := startFromFactory(t, cfg)
	ctx := context.Background()

	redrained := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "gpu-node1", fault.StateOpen)
	plain := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "gpu-node2", fault.StateOpen)
	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, redrained, plain)))
	ours := c.DrainReasons()["gpu-node1"]
	require.Equal(t, "otelcol-gpu: nvlink.degraded "+redrained.ID, ours)

	c.Run("scontrol", "update", "NodeName=gpu-node1", "State=RESUME")
	c.WaitFor("gpu-node1 resumed by the human", func() bool { return slurmNodeState(c, "gpu-node1") == "idle" })
	// slurmctld stamps reasons to the second: the human's comes later.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	c.Run("scontrol", "update", "NodeName=gpu-node1", "State=DRAIN", "Reason="+ours)

	require.NoError(t, exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords,
		withState(redrained, fault.StateResolved), withState(plain, fault.StateResolved))))
	c.WaitFor("gpu-node2 resumed", func() bool {
		_, drained := c.DrainReasons()["gpu-node2"]
		return !drained && strings.HasPrefix(slurmNodeState(c, "gpu-node2"), "idle")
	})
	var skipped []audit.Entry
	c.WaitFor("gpu-node1 release audited", func() bool {
		skipped = auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionSkipped, "gpu-node1"))
		return len(skipped) == 1
	})
	assert.Contains(t, skipped[0].Reason, "drained again after ours")
	assert.Equal(t, ours, c.DrainReasons()["gpu-node1"], "the human's drain stays")
	assert.Empty(t, auditEntries(t, cfg.AuditFile, stepDecision(stepRelease, audit.DecisionActed, "gpu-node1")))
}
