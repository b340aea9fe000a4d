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

// The quarantine cap against a real slurmctld: 20 GPU nodes, a cap of two;
// the third fault is refused and trips the breaker (its state file, the
// cap named), which a restarted exporter reads tripped; through the
// console a drained node is resumed and the breaker reset, and the
// waiting fault drains its node.
func TestSlurmQuarantineCapTripsTheBreaker(t *testing.T) {
	c := slurmtest.Start(t, 20)
	hook, url := newSignedHook(t)
	cfg := slurmActingConfig(t, c, url)
	cfg.MaxQuarantinedFraction = 0.1
	cfg.Console = testConsoleID.String()
	rc := &recordingConsole{}
	exp := startFromFactoryOn(t, cfg, extHost{testConsoleID: rc})
	ctl := rc.ctl(t)
	ctx := context.Background()

	consumeSlurm(t, exp,
		faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "gpu-node1", fault.StateOpen),
		faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "gpu-node2", fault.StateOpen))
	require.Len(t, c.DrainReasons(), 2)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node7", fault.StateOpen)
	consumeSlurm(t, exp, dbe)
	assert.NotContains(t, c.DrainReasons(), "gpu-node7", "refused by the cap")
	assert.Len(t, auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepQuarantine && e.Node == "gpu-node7" && strings.HasPrefix(e.Reason, "quarantine cap: 2 of 20")
	}), 1)

	raw, err := os.ReadFile(cfg.Slurm.StateFile)
	require.NoError(t, err)
	var st struct {
		Tripped bool   `json:"tripped"`
		Detail  string `json:"detail"`
	}
	require.NoError(t, json.Unmarshal(raw, &st))
	assert.True(t, st.Tripped)
	assert.Equal(t, "tripped by the quarantine cap: gpu.memory.dbe "+dbe.ID+" (P1) on gpu-node7 refused, 2 of 20 GPU nodes already quarantined by this exporter (max_quarantined_fraction 0.1 allows 2)", st.Detail)
	assert.Len(t, hook.deliveriesWith("breaker_tripped"), 1)
	b, err := ctl.Breaker(ctx)
	require.NoError(t, err)
	assert.True(t, b.Tripped)
	require.NotNil(t, b.QuarantineCap)
	assert.Equal(t, 2, b.QuarantineCap.Held)
	assert.Equal(t, 2, b.QuarantineCap.Limit)
	require.Len(t, b.QuarantineCap.Waiting, 1)
	assert.Equal(t, "gpu-node7", b.QuarantineCap.Waiting[0].Node)

	// A second exporter on the same state file (a restart) reads it
	// tripped: nothing drains, even a node the cap has room for.
	cfg2 := slurmActingConfig(t, c, url)
	cfg2.MaxQuarantinedFraction = 1
	cfg2.Slurm.StateFile = cfg.Slurm.StateFile
	exp2 := startFromFactory(t, cfg2)
	consumeSlurm(t, exp2, faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "gpu-node9", fault.StateOpen))
	assert.NotContains(t, c.DrainReasons(), "gpu-node9")
	assert.Len(t, auditEntries(t, cfg2.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, "gpu-node9")), 1)

	// The operator: resume a forged drain, reset the breaker; the DBE drains.
	_, err = ctl.Release(ctx, "gpu-node1", operator)
	require.NoError(t, err)
	require.NoError(t, ctl.ResetBreaker(ctx, operator))
	c.WaitFor("gpu-node7 drained for the DBE", func() bool {
		return c.DrainReasons()["gpu-node7"] == "otelcol-gpu: gpu.memory.dbe "+dbe.ID
	})
	b, err = ctl.Breaker(ctx)
	require.NoError(t, err)
	assert.False(t, b.Tripped)
	assert.Empty(t, b.QuarantineCap.Waiting)
}
