//go:build slurm

package slurm

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

func dbe(node, id string) actuator.Request {
	return actuator.Request{Node: node, FaultID: id, FaultType: "gpu.ecc.dbe", Severity: "P1", Actions: []actuator.Action{actuator.ActionDrain}}
}

func TestSlurmQuarantineAndRelease(t *testing.T) {
	c := startSlurm(t, 5)
	p := c.platform(func(cfg *Config) { cfg.StripDomainSuffix = ".cluster.example" })
	ctx := context.Background()

	// One DBE: drained with our reason.
	res, err := p.Quarantine(ctx, dbe("gpu-node1", "a07573c9c14f1fae"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	assert.Contains(t, c.nodeLine("gpu-node1"), "State=IDLE+DRAIN")
	assert.Equal(t, "otelcol-gpu: gpu.ecc.dbe a07573c9c14f1fae", c.drainReasons()["gpu-node1"])

	// The same fault again, and another fault of ours: already done.
	res, err = p.Quarantine(ctx, dbe("gpu-node1", "a07573c9c14f1fae"))
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)
	res, err = p.Quarantine(ctx, dbe("gpu-node1", "ffff000011112222"))
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)
	assert.Equal(t, "otelcol-gpu: gpu.ecc.dbe a07573c9c14f1fae", c.drainReasons()["gpu-node1"], "reason untouched")

	// Drained by someone else: left alone, reason kept.
	c.run("scontrol", "update", "NodeName=gpu-node2", "State=DRAIN", "Reason=admin: fan check")
	res, err = p.Quarantine(ctx, dbe("gpu-node2", "b"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipForeign, res.Outcome, res.Detail)
	assert.Equal(t, "admin: fan check", c.drainReasons()["gpu-node2"])

	// In an active maintenance reservation: excluded, not drained.
	c.run("scontrol", "create", "reservation", "ReservationName=maint", "StartTime=now", "Duration=60",
		"Nodes=gpu-node[3]", "Flags=MAINT", "Users=root")
	res, err = p.Quarantine(ctx, dbe("gpu-node3", "c"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome, res.Detail)
	assert.NotContains(t, c.nodeLine("gpu-node3"), "DRAIN")

	// host.name with a domain maps to the NodeName; unknown nodes are skipped.
	res, err = p.Quarantine(ctx, dbe("gpu-node4.cluster.example", "d"))
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	assert.Contains(t, c.drainReasons(), "gpu-node4")
	res, err = p.Quarantine(ctx, dbe("gpu-node99", "e"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNotFound, res.Outcome)

	// Release: never someone else's drain, never another fault's.
	res, err = p.Release(ctx, dbe("gpu-node2", "b"))
	require.NoError(t, err)
	assert.Equal(t, actuator.NotOurs, res.Outcome)
	assert.Equal(t, "admin: fan check", c.drainReasons()["gpu-node2"])
	res, err = p.Release(ctx, dbe("gpu-node1", "0000000000000000"))
	require.NoError(t, err)
	assert.Equal(t, actuator.NotOurs, res.Outcome)
	assert.Contains(t, c.drainReasons(), "gpu-node1")

	// The exporter releases with every fault it holds the node for; the
	// reason names only the one that drained it.
	both := dbe("gpu-node1", "ffff000011112222")
	both.FaultIDs = []string{"ffff000011112222", "a07573c9c14f1fae"}
	res, err = p.Release(ctx, both)
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	c.waitFor("gpu-node1 idle after RESUME", func() bool {
		out, err := c.try("sinfo", "-h", "-n", "gpu-node1", "-o", "%T")
		return err == nil && strings.TrimSpace(out) == "idle"
	})
	assert.NotContains(t, c.drainReasons(), "gpu-node1")
	res, err = p.Release(ctx, dbe("gpu-node1", "a07573c9c14f1fae"))
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)
}

func TestSlurmBreakerTripsAtShare(t *testing.T) {
	c := startSlurm(t, 10)
	stateFile := filepath.Join(t.TempDir(), "breaker.json")
	withBreaker := func(cfg *Config) {
		cfg.StateFile = stateFile
		cfg.Breaker = BreakerConfig{MaxShare: 0.2, Window: time.Hour}
	}
	p := c.platform(withBreaker)
	ctx := context.Background()

	// A bad switch makes all ten nodes look faulty at once.
	var admitted []string
	for _, node := range c.nodes {
		ok, err := p.Breaker().Admit(ctx, node, time.Now())
		require.NoError(t, err)
		if !ok {
			continue
		}
		admitted = append(admitted, node)
		res, err := p.Quarantine(ctx, dbe(node, "f"+node))
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome)
	}
	assert.Len(t, admitted, 2, "max_share 0.2 of 10 nodes")
	reasons := c.drainReasons()
	assert.Len(t, reasons, 2)
	for _, n := range admitted {
		assert.True(t, strings.HasPrefix(reasons[n], "otelcol-gpu:"), n)
	}
	tripped, err := p.Breaker().Tripped(ctx)
	require.NoError(t, err)
	assert.True(t, tripped)

	// A restart reads the tripped flag from the state file.
	restarted := c.platform(withBreaker)
	tripped, err = restarted.Breaker().Tripped(ctx)
	require.NoError(t, err)
	assert.True(t, tripped)

	// A replica without the state file recounts from Slurm: a node drained
	// by us is admitted again without counting twice, a new one is refused.
	replica := c.platform(func(cfg *Config) { cfg.Breaker = BreakerConfig{MaxShare: 0.2, Window: time.Hour} })
	ok, err := replica.Breaker().Admit(ctx, admitted[0], time.Now())
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = replica.Breaker().Admit(ctx, "gpu-node10", time.Now())
	require.NoError(t, err)
	assert.False(t, ok, "two drains of ours already in Slurm")
	assert.Len(t, c.drainReasons(), 2)
}

func TestSlurmQuarantineLatency(t *testing.T) {
	c := startSlurm(t, 10)
	p := c.platform(nil)
	ctx := context.Background()
	const calls = 50
	var lat []time.Duration
	for i := range calls {
		node := c.nodes[i%len(c.nodes)]
		start := time.Now()
		res, err := p.Quarantine(ctx, dbe(node, fmt.Sprintf("%016x", i)))
		lat = append(lat, time.Since(start))
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
		res, err = p.Release(ctx, dbe(node, fmt.Sprintf("%016x", i)))
		require.NoError(t, err)
		require.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[(len(lat)*99+99)/100-1]
	t.Logf("Quarantine over scontrol (read node, read reservations, update): n=%d p50=%s p99=%s max=%s", calls, p50, p99, lat[len(lat)-1])
	assert.Positive(t, p50)
}

// The real slurmrestd of Slurm 22.05 serves v0.0.38, which reads nodes
// and reservations but has no node update: check the REST reads agree with
// scontrol on the same cluster.
func TestSlurmrestdReadsMatchScontrol(t *testing.T) {
	c := startSlurm(t, 3)
	sock := c.startSlurmrestd("v0.0.38")
	c.run("scontrol", "update", "NodeName=gpu-node2", "State=DRAIN", "Reason=otelcol-gpu: gpu.ecc.dbe 42")
	c.run("scontrol", "create", "reservation", "ReservationName=maint", "StartTime=now", "Duration=60",
		"Nodes=gpu-node[1,3]", "Flags=MAINT", "Users=root")

	rt, err := newRestTransport(RestConfig{URL: "unix://" + sock, Token: "unused-by-local-auth", User: "root", APIVersion: "v0.0.38"}, 10*time.Second)
	require.NoError(t, err)
	defer rt.close()
	sc := &scontrolTransport{path: "scontrol", timeout: 10 * time.Second, env: c.env}
	ctx := context.Background()

	viaRest, err := rt.node(ctx, "gpu-node2")
	require.NoError(t, err)
	viaScontrol, err := sc.node(ctx, "gpu-node2")
	require.NoError(t, err)
	assert.Equal(t, "otelcol-gpu: gpu.ecc.dbe 42", viaRest.Reason)
	assert.Equal(t, viaScontrol.Reason, viaRest.Reason)
	assert.True(t, viaRest.unavailable())
	assert.True(t, viaRest.ReasonTime.Equal(viaScontrol.ReasonTime), "%s vs %s", viaRest.ReasonTime, viaScontrol.ReasonTime)
	assert.Equal(t, 8, gresGPUs(viaRest.Gres), viaRest.Gres)
	assert.Equal(t, 8, gresGPUs(viaScontrol.Gres), viaScontrol.Gres)

	_, err = rt.node(ctx, "gpu-node99")
	assert.ErrorIs(t, err, errNodeNotFound)

	all, err := rt.nodes(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 3)

	resvs, err := rt.reservations(ctx)
	require.NoError(t, err)
	require.Len(t, resvs, 1)
	assert.True(t, resvs[0].Active)
	assert.True(t, resvs[0].maintenance())
	in, err := hostlistContains(resvs[0].Nodes, "gpu-node3")
	require.NoError(t, err)
	assert.True(t, in, resvs[0].Nodes)

	// The platform over REST reads and excludes the same way.
	p := newPlatform(NewDefaultConfig(), rt, nil)
	res, err := p.Quarantine(ctx, dbe("gpu-node2", "42"))
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)
	res, err = p.Quarantine(ctx, dbe("gpu-node1", "43"))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome)
}
