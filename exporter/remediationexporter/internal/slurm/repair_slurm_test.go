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
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"
)

// The reboot against the real slurmctld: `scontrol reboot ASAP
// nextstate=DOWN`, RebootProgram run by the real slurmd, the machine's
// boot played by restarting slurmd with a new boot time (slurmtest.Reboot).
func TestSlurmReboot(t *testing.T) {
	c := startSlurmOpts(t, slurmtest.Options{GPUNodes: 4, ResumeTimeout: 10 * time.Second})
	p := c.platform(nil)
	ctx := context.Background()
	quarantine := func(node, id string) {
		t.Helper()
		res, err := p.Quarantine(ctx, dbe(node, id))
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	}
	start := func(req actuator.RepairRequest, want actuator.Outcome) actuator.Result {
		t.Helper()
		res, err := p.StartRepair(ctx, req)
		require.NoError(t, err)
		require.Equal(t, want, res.Outcome, res.Detail)
		return res
	}
	status := func(req actuator.RepairRequest) actuator.RepairProgress {
		t.Helper()
		prog, err := p.RepairStatus(ctx, req)
		require.NoError(t, err)
		return prog
	}
	node := func(name string) nodeInfo { t.Helper(); return parseOne(t, c.nodeLine(name)) }
	reboots := func() int { return len(c.RebootRequests()) }
	// rebootIssued waits for RebootProgram to have run once more than
	// before, and plays the machine's reboot.
	rebootNow := func(name string, before int) {
		t.Helper()
		c.waitFor(name+" REBOOT_ISSUED", func() bool { return reboots() > before && node(name).has("REBOOT_ISSUED") })
		c.Reboot(name)
	}
	// settled waits for a final state of the repair.
	settled := func(r actuator.RepairRequest) actuator.RepairProgress {
		t.Helper()
		var prog actuator.RepairProgress
		c.waitFor(r.Node+" reboot settled", func() bool {
			prog = status(r)
			return prog.State == actuator.RepairDone || prog.State == actuator.RepairFailed
		})
		return prog
	}
	req := func(name, id string, attempt int) actuator.RepairRequest {
		r := rebootReq(name, id, attempt)
		r.Requested = time.Now()
		return r
	}

	t.Run("RebootStaysDownUntilRelease", func(t *testing.T) {
		quarantine("gpu-node1", "f-1")
		drained, detail, err := p.Drained(ctx, "gpu-node1")
		require.NoError(t, err)
		assert.True(t, drained, detail)

		before := reboots()
		r1 := req("gpu-node1", "f-1", 1)
		res := start(r1, actuator.Applied)
		assert.Contains(t, res.Detail, "nextstate=DOWN")
		n := node("gpu-node1")
		assert.True(t, rebootPending(n), "flags: %v", n.States)
		assert.Equal(t, "DOWN", n.NextState)
		assert.Equal(t, "otelcol-gpu: reboot 1 gpu.ecc.dbe f-1", strings.TrimSuffix(n.Reason, rebootIssued))
		assert.True(t, n.has("DRAIN"))

		// Asked again (a retry, a restart): already done, no second reboot.
		start(r1, actuator.AlreadyDone)
		assert.Equal(t, actuator.RepairPending, status(r1).State)
		// No release while the reboot is in flight.
		_, err = p.Release(ctx, dbe("gpu-node1", "f-1"))
		require.Error(t, err)
		assert.True(t, node("gpu-node1").unavailable())

		rebootNow("gpu-node1", before)
		prog := settled(r1)
		require.Equal(t, actuator.RepairDone, prog.State, prog.Detail)
		assert.Equal(t, before+1, reboots(), "RebootProgram ran once")
		n = node("gpu-node1")
		assert.Equal(t, []string{"DOWN"}, n.States, "back from the reboot, still out of service until verified")
		assert.Empty(t, n.NextState)
		assert.True(t, strings.HasSuffix(n.Reason, rebootComplete), n.Reason)
		assert.False(t, n.BootTime.Before(r1.Requested.Truncate(time.Second)), "booted %s, requested %s", n.BootTime, r1.Requested)
		// Stays DOWN: nothing returns it but the release.
		time.Sleep(1500 * time.Millisecond)
		assert.Equal(t, []string{"DOWN"}, node("gpu-node1").States)
		start(r1, actuator.AlreadyDone)

		// Verification failed: a second reboot of the same loop.
		before = reboots()
		r2 := req("gpu-node1", "f-1", 2)
		start(r2, actuator.Applied)
		assert.Equal(t, "otelcol-gpu: reboot 2 gpu.ecc.dbe f-1", strings.TrimSuffix(node("gpu-node1").Reason, rebootIssued))
		assert.Equal(t, actuator.RepairFailed, status(r1).State, "reboot 1's reason is gone")
		rebootNow("gpu-node1", before)
		prog = settled(r2)
		require.Equal(t, actuator.RepairDone, prog.State, prog.Detail)

		// A new leader after a failover (no marks of its own) adopts the
		// rebooted node when it acts on the fault again, and can release it.
		replica := c.platform(nil)
		res, err = replica.Release(ctx, dbe("gpu-node1", "f-1"))
		require.NoError(t, err)
		assert.Equal(t, actuator.NotOurs, res.Outcome, "unknown to the new leader: %s", res.Detail)
		res, err = replica.Quarantine(ctx, dbe("gpu-node1", "f-1"))
		require.NoError(t, err)
		assert.Equal(t, actuator.AlreadyDone, res.Outcome, res.Detail)
		mark, held := replica.drains.get("gpu-node1")
		require.True(t, held)
		assert.True(t, mark.reboot, "adopted as our reboot's reason")
		p = replica

		// Verified: the release resumes the node DOWN with our reason.
		res, err = p.Release(ctx, dbe("gpu-node1", "f-1"))
		require.NoError(t, err)
		assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		c.waitFor("gpu-node1 idle", func() bool {
			out, err := c.try("sinfo", "-h", "-n", "gpu-node1", "-o", "%T")
			return err == nil && strings.TrimSpace(out) == "idle"
		})
		assert.NotContains(t, c.drainReasons(), "gpu-node1")
	})

	t.Run("NotOursUntouched", func(t *testing.T) {
		before := reboots()
		// In service.
		start(req("gpu-node2", "f-2", 1), actuator.NotOurs)
		assert.Equal(t, []string{"IDLE"}, node("gpu-node2").States)
		// Drained by a human.
		c.run("scontrol", "update", "NodeName=gpu-node2", "State=DRAIN", "Reason=admin: fan check")
		start(req("gpu-node2", "f-2", 1), actuator.NotOurs)
		n := node("gpu-node2")
		assert.Equal(t, "admin: fan check", n.Reason)
		assert.False(t, rebootPending(n), "flags: %v", n.States)
		// Drained by us, for another fault.
		quarantine("gpu-node3", "f-3")
		start(req("gpu-node3", "f-other", 1), actuator.NotOurs)
		// Drained by us, but this replica did not write that drain.
		replica := c.platform(nil)
		res, err := replica.StartRepair(ctx, req("gpu-node3", "f-3", 1))
		require.NoError(t, err)
		assert.Equal(t, actuator.NotOurs, res.Outcome, res.Detail)
		n = node("gpu-node3")
		assert.Equal(t, "otelcol-gpu: gpu.ecc.dbe f-3", n.Reason)
		assert.False(t, rebootPending(n), "flags: %v", n.States)
		c.run("scontrol", "update", "NodeName=gpu-node2", "State=RESUME")
		c.waitFor("gpu-node2 idle", func() bool { return strings.Join(node("gpu-node2").States, "+") == "IDLE" })
		// Unknown node.
		start(req("gpu-node99", "f-2", 1), actuator.SkipNotFound)
		assert.Equal(t, before, reboots(), "RebootProgram never ran")
	})

	t.Run("DrainedOnlyOnceTheJobEnded", func(t *testing.T) {
		out := c.run("sbatch", "--parsable", "-w", "gpu-node2", "-o", "/dev/null", "--wrap", "sleep 300")
		job := strings.TrimSpace(out)
		c.waitFor("job running", func() bool { return node("gpu-node2").has("ALLOCATED") })
		// A reboot someone else asked for, pending while the job runs:
		// left alone.
		before := reboots()
		c.run("scontrol", "reboot", "nextstate=RESUME", "reason=admin: firmware", "gpu-node2")
		start(req("gpu-node2", "f-5", 1), actuator.NotOurs)
		n := node("gpu-node2")
		assert.Equal(t, "RESUME", n.NextState)
		assert.Equal(t, "admin: firmware", n.Reason)
		c.run("scontrol", "cancel_reboot", "gpu-node2")
		c.waitFor("reboot cancelled", func() bool { return !rebootPending(node("gpu-node2")) })
		assert.Equal(t, before, reboots())

		quarantine("gpu-node2", "f-5")
		drained, detail, err := p.Drained(ctx, "gpu-node2")
		require.NoError(t, err)
		assert.False(t, drained, detail)
		assert.Contains(t, detail, "ALLOCATED+DRAIN")
		c.run("scancel", job)
		c.waitFor("drained", func() bool {
			drained, _, err := p.Drained(ctx, "gpu-node2")
			return err == nil && drained
		})
		drained, detail, err = p.Drained(ctx, "gpu-node1")
		require.NoError(t, err)
		assert.False(t, drained, "released: in service: %s", detail)
	})

	t.Run("TimedOut", func(t *testing.T) {
		quarantine("gpu-node4", "f-4")
		r := req("gpu-node4", "f-4", 1)
		start(r, actuator.Applied)
		// The machine never comes back: slurmctld marks the reboot timed
		// out after ResumeTimeout.
		prog := settled(r)
		require.Equal(t, actuator.RepairFailed, prog.State, prog.Detail)
		n := node("gpu-node4")
		assert.True(t, strings.HasSuffix(n.Reason, rebootTimedOut), n.Reason)
		assert.True(t, n.has("DOWN"))
		assert.False(t, rebootPending(n))
	})
}
