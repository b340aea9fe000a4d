//go:build slurm

package remediationexporter

import (
	"context"
	"fmt"
	"path/filepath"
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

// The rails before the breaker and beside it, against a real slurmctld:
// ghost nodes, nodes without a gpu GRES, and the quarantined-share cap.

func slurmActingConfig(t *testing.T, c *slurmtest.Cluster, url string) *Config {
	t.Setenv("SLURM_CONF", c.Conf)
	cfg := actingConfig(t, url)
	cfg.Slurm.Enabled = true
	cfg.Slurm.StateFile = filepath.Join(t.TempDir(), "breaker.json")
	return cfg
}

func consumeSlurm(t *testing.T, exp *remediationExporter, recs ...fault.Record) {
	t.Helper()
	require.NoError(t, exp.ConsumeLogs(context.Background(), logsOf(semconv.ScopeFaultRecords, recs...)))
}

// Forged faults naming nodes Slurm does not know spend none of the
// breaker's budget; a real DBE afterwards drains its node. A login node
// without a gpu GRES is never drained.
func TestSlurmRailsGhostAndNoGPUNodes(t *testing.T) {
	c := slurmtest.StartWith(t, 10, 1)
	hook, url := newSignedHook(t)
	cfg := slurmActingConfig(t, c, url)
	cfg.Slurm.Breaker.MaxShare = 0.1 // 11 nodes: a budget of one
	cfg.MaxQuarantinedFraction = 1
	exp := startFromFactory(t, cfg)

	var forged []fault.Record
	for i := range 20 {
		forged = append(forged, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, fmt.Sprintf("gpu-node%d", 100+i), fault.StateOpen))
	}
	consumeSlurm(t, exp, forged...)
	skipped := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, ""))
	require.Len(t, skipped, 20)
	for _, e := range skipped {
		assert.Equal(t, "skip_not_found", e.Outcome)
		assert.Equal(t, "skip_not_found: no Slurm node "+e.Node, e.Reason)
	}

	consumeSlurm(t, exp, faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "cpu-node1", fault.StateOpen))
	noGPU := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, "cpu-node1"))
	require.Len(t, noGPU, 1)
	assert.Equal(t, "skip_no_gpu", noGPU[0].Outcome)
	assert.Equal(t, "skip_no_gpu: cpu-node1 has no GPU: no gpu GRES (Gres=(null))", noGPU[0].Reason)
	assert.Empty(t, c.DrainReasons(), "nothing drained")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node4", fault.StateOpen)
	consumeSlurm(t, exp, dbe)
	assert.Equal(t, map[string]string{"gpu-node4": "otelcol-gpu: gpu.memory.dbe " + dbe.ID}, c.DrainReasons())
	tripped, err := exp.platform.Breaker().Tripped(context.Background())
	require.NoError(t, err)
	assert.False(t, tripped)
	assert.Empty(t, hook.deliveriesWith("breaker_tripped"))
}

// 20 GPU nodes, max_quarantined_fraction 0.1: faults on every one of them,
// four per breaker window over five windows (the breaker alone would drain
// all 20), drain two; a second exporter reads the same two from Slurm.
func TestSlurmRailsQuarantinedShareCap(t *testing.T) {
	c := slurmtest.Start(t, 20)
	_, url := newSignedHook(t)
	cfg := slurmActingConfig(t, c, url)
	cfg.Slurm.Breaker.MaxShare = 0.2 // four per window
	cfg.Slurm.Breaker.Window = time.Second
	cfg.MaxQuarantinedFraction = 0.1
	cfg.QuarantineCapTripsBreaker = false // the trip: quarantinecap_slurm_test.go
	exp := startFromFactory(t, cfg)

	for round := range 5 {
		var recs []fault.Record
		for _, node := range c.Nodes[round*4 : round*4+4] {
			recs = append(recs, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, node, fault.StateOpen))
		}
		consumeSlurm(t, exp, recs...)
		time.Sleep(1200 * time.Millisecond) // a new breaker window (reason times have whole seconds)
	}
	reasons := c.DrainReasons()
	assert.Len(t, reasons, 2)
	assert.Contains(t, reasons, "gpu-node1")
	assert.Contains(t, reasons, "gpu-node2")
	capped := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepQuarantine && e.Decision == audit.DecisionSkipped && strings.HasPrefix(e.Reason, "quarantine cap")
	})
	require.Len(t, capped, 18)
	assert.Equal(t, "quarantine cap: 2 of 20 GPU nodes already quarantined by this exporter (max_quarantined_fraction 0.1 allows 2)", capped[0].Reason)
	tripped, err := exp.platform.Breaker().Tripped(context.Background())
	require.NoError(t, err)
	assert.False(t, tripped, "the cap refuses before the breaker")

	// A restarted exporter (its own audit file and breaker state) counts
	// the drains in Slurm.
	cfg2 := slurmActingConfig(t, c, url)
	cfg2.MaxQuarantinedFraction = 0.1
	cfg2.QuarantineCapTripsBreaker = false
	exp2 := startFromFactory(t, cfg2)
	consumeSlurm(t, exp2, faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "gpu-node20", fault.StateOpen))
	assert.Len(t, c.DrainReasons(), 2)
	assert.Len(t, auditEntries(t, cfg2.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepQuarantine && strings.HasPrefix(e.Reason, "quarantine cap: 2 of 20")
	}), 1)
}
