//go:build slurm

package slurm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// Release resumes only the drain we wrote (drains.go): a human who resumes
// our drain and drains the node again, with their own reason or with ours
// copied, keeps their drain.
func TestSlurmReleaseOnlyOurDrain(t *testing.T) {
	c := startSlurm(t, 4)
	p := c.platform(nil)
	ctx := context.Background()
	drain := func(node, id string) string {
		t.Helper()
		res, err := p.Quarantine(ctx, dbe(node, id))
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		return c.drainReasons()[node]
	}
	// humanRedrain resumes node and drains it again with reason, in a later
	// second than our drain: slurmctld stamps reasons to the second.
	humanRedrain := func(node, reason string) {
		t.Helper()
		c.run("scontrol", "update", "NodeName="+node, "State=RESUME")
		c.waitFor(node+" resumed", func() bool {
			out, err := c.try("sinfo", "-h", "-n", node, "-o", "%T")
			return err == nil && strings.TrimSpace(out) == "idle"
		})
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
		c.run("scontrol", "update", "NodeName="+node, "State=DRAIN", "Reason="+reason)
	}
	resumed := func(node string) {
		t.Helper()
		c.waitFor(node+" idle after RESUME", func() bool {
			out, err := c.try("sinfo", "-h", "-n", node, "-o", "%T")
			return err == nil && strings.TrimSpace(out) == "idle"
		})
		assert.NotContains(t, c.drainReasons(), node)
	}

	t.Run("PlainDrainReleased", func(t *testing.T) {
		drain("gpu-node1", "f-plain")
		res, err := p.Release(ctx, dbe("gpu-node1", "f-plain"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		resumed("gpu-node1")
	})

	t.Run("HumanDrainsAgainWithOwnReason", func(t *testing.T) {
		drain("gpu-node2", "f-own")
		humanRedrain("gpu-node2", "admin: fan check")
		res, err := p.Release(ctx, dbe("gpu-node2", "f-own"))
		require.NoError(t, err)
		assert.Equal(t, actuator.NotOurs, res.Outcome, res.Detail)
		assert.Equal(t, "admin: fan check", c.drainReasons()["gpu-node2"], "the human's drain stays")
	})

	t.Run("HumanDrainsAgainWithOurReasonCopied", func(t *testing.T) {
		ours := drain("gpu-node3", "f-copied")
		require.Equal(t, "otelcol-gpu: gpu.ecc.dbe f-copied", ours)
		humanRedrain("gpu-node3", ours)
		// A second fault record finds the node drained under our words:
		// already done, and the drain is still not taken for ours.
		res, err := p.Quarantine(ctx, dbe("gpu-node3", "f-copied"))
		require.NoError(t, err)
		assert.Equal(t, actuator.AlreadyDone, res.Outcome, res.Detail)
		res, err = p.Release(ctx, dbe("gpu-node3", "f-copied"))
		require.NoError(t, err)
		assert.Equal(t, actuator.NotOurs, res.Outcome, res.Detail)
		assert.Contains(t, res.Detail, "drained again after ours")
		assert.Contains(t, c.nodeLine("gpu-node3"), "DRAIN", "the human's drain stays")
		assert.Equal(t, ours, c.drainReasons()["gpu-node3"])
	})

	t.Run("FailoverAdoptsOnlyAFaultItActsOn", func(t *testing.T) {
		drain("gpu-node4", "f-failover")
		replica := c.platform(nil) // the new leader: no marks of its own
		res, err := replica.Release(ctx, dbe("gpu-node4", "f-failover"))
		require.NoError(t, err)
		assert.Equal(t, actuator.NotOurs, res.Outcome, res.Detail)
		assert.Contains(t, c.drainReasons(), "gpu-node4", "unknown to this replica: stays")
		// It reads the fault again and acts on it: the drain names it.
		res, err = replica.Quarantine(ctx, dbe("gpu-node4", "f-failover"))
		require.NoError(t, err)
		assert.Equal(t, actuator.AlreadyDone, res.Outcome, res.Detail)
		res, err = replica.Release(ctx, dbe("gpu-node4", "f-failover"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		resumed("gpu-node4")
	})
}
