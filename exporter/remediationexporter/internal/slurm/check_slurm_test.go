//go:build slurm

package slurm

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// Check against a real slurmctld: GPU nodes are those with a gpu GRES, a
// login node without one is never drained, our drains are counted.
func TestSlurmCheck(t *testing.T) {
	c := startSlurmWith(t, 3, 1)
	p := c.platform(nil)
	ctx := context.Background()

	got, err := p.Check(ctx, actuator.Request{Node: "gpu-node1"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{GPUNodes: 3}, got)

	got, err = p.Check(ctx, actuator.Request{Node: "gpu-node99"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{Skip: actuator.SkipNotFound, Detail: "no Slurm node gpu-node99"}, got)

	got, err = p.Check(ctx, actuator.Request{Node: "cpu-node1"})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNoGPU, got.Skip)
	assert.Equal(t, "cpu-node1 has no GPU: no gpu GRES (Gres=(null))", got.Detail)
	res, err := p.Quarantine(ctx, dbe("cpu-node1", "f-cpu"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNoGPU, res.Outcome, res.Detail)
	assert.NotContains(t, c.drainReasons(), "cpu-node1", "never drained")

	// Our drain is read back as ours and counted; someone else's is not.
	res, err = p.Quarantine(ctx, dbe("gpu-node1", "f-gpu1"))
	require.NoError(t, err)
	require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	c.run("scontrol", "update", "NodeName=gpu-node3", "State=DRAIN", "Reason=admin: fan check")
	got, err = p.Check(ctx, actuator.Request{Node: "gpu-node1"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{Ours: true, GPUNodes: 3, Quarantined: 1}, got)
	got, err = p.Check(ctx, actuator.Request{Node: "gpu-node2"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{GPUNodes: 3, Quarantined: 1}, got)
	got, err = p.Check(ctx, actuator.Request{Node: "gpu-node3"})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipForeign, got.Skip, got.Detail)

	// A restarted exporter (a new platform) reads the same from Slurm.
	got, err = c.platform(nil).Check(ctx, actuator.Request{Node: "gpu-node2"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{GPUNodes: 3, Quarantined: 1}, got)
}

// A slot refunded (the node was left alone after Admit) is there again.
func TestSlurmBreakerRefund(t *testing.T) {
	c := startSlurm(t, 2)
	p := c.platform(func(cfg *Config) { cfg.Breaker = BreakerConfig{MaxShare: 0.5, Window: time.Hour} })
	ctx := context.Background()
	now := time.Now()
	ok, err := p.Breaker().Admit(ctx, "gpu-node1", now)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, p.Breaker().Refund(ctx, "gpu-node1", now))
	ok, err = p.Breaker().Admit(ctx, "gpu-node2", now.Add(time.Second))
	require.NoError(t, err)
	assert.True(t, ok, "the refunded slot")
	ok, err = p.Breaker().Admit(ctx, "gpu-node1", now.Add(2*time.Second))
	require.NoError(t, err)
	assert.False(t, ok, "one slot of two nodes")
}
