package remediationexporter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// junkOn is the i-th distinct low-severity fault on node: an XID on one of
// its GPUs, so each has its own fault.id; 50 XID codes, 50 sources.
func junkOn(node string, i int) fault.Record {
	r := faultOn(fault.TypeGPUXID, fault.SeverityP3, node, fault.StateOpen)
	r.XID = 100 + i%50
	r.Action = fault.ActionNone
	r.GPUUUID = fmt.Sprintf("GPU-%s-%d", node, i)
	r.Entity = fault.Entity{Kind: fault.EntityGPU, Key: r.GPUUUID}
	r.ID = r.ComputeID(fault.DefaultBucket)
	return r
}

// postsAbout returns the hook's payloads about node.
func postsAbout(h *harness, node string) int {
	n := 0
	for _, p := range h.hook.got() {
		if p.Decision.Node == node {
			n++
		}
	}
	return n
}

// 10,000 posts' worth of faults from one node: the node gets its cap
// (max_posts_per_node, default 20 per 10m), the rest are audited and not
// sent; a fault on another node is still posted, and a P1 on the noisy
// node still pages. After the window the node posts again.
func TestWebhookCapsOneNodeCannotCrowdOutOthers(t *testing.T) {
	h := newHarness(t)
	const junk = 10_000
	recs := make([]fault.Record, 0, 500)
	for i := range junk {
		recs = append(recs, junkOn("noisy", i))
		if len(recs) == cap(recs) {
			require.NoError(t, h.consume(recs...))
			recs = recs[:0]
		}
	}
	cfg := h.exp.cfg.Webhook
	assert.Equal(t, cfg.MaxPostsPerNode, postsAbout(h, "noisy"))

	capped := h.auditFor(stepWebhook, audit.DecisionSkipped)
	require.Len(t, capped, junk-cfg.MaxPostsPerNode, "every post not sent is audited")
	byReason := map[string]int{}
	for _, e := range capped {
		byReason[e.Reason]++
		assert.Equal(t, "noisy", e.Node)
		assert.Equal(t, "p3_p4_record", e.Rule)
	}
	assert.Equal(t, map[string]int{
		`webhook cap: node "noisy" over max_posts_per_node (20 per 10m0s)`: junk - 20,
	}, byReason, "50 sources of 200 faults each: the node cap binds before the source cap (5)")
	warned := h.logs.FilterMessage("webhook posts capped: further posts over this cap are audited, not logged").All()
	assert.Len(t, warned, 1, "the flood is logged once")

	require.NoError(t, h.consume(junkOn("quiet", 0)))
	assert.Equal(t, 1, postsAbout(h, "quiet"), "another node is posted about")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "noisy", fault.StateOpen)
	require.NoError(t, h.consume(dbe))
	assert.Equal(t, cfg.MaxPostsPerNode+1, postsAbout(h, "noisy"), "a P1 on the noisy node still pages")
	q, _ := h.platform.counts()
	assert.Equal(t, 1, q, "and the caps never touched the action path")

	h.clock.Advance(cfg.PerNodeWindow)
	require.NoError(t, h.consume(junkOn("noisy", junk)))
	assert.Equal(t, cfg.MaxPostsPerNode+2, postsAbout(h, "noisy"), "the cap resets after the window")
}

// One noisy fault type on a node uses up its source's posts, not the
// node's: another fault type on that node is still posted.
func TestWebhookCapsPerSource(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *dependencies) { c.Webhook.MaxPostsPerSource = 3 })
	var recs []fault.Record
	for i := range 100 {
		r := junkOn("a100", i)
		r.XID = 13 // one source: gpu.xid.13
		r.Action = fault.ActionRestartApp
		r.ID = r.ComputeID(fault.DefaultBucket)
		recs = append(recs, r)
	}
	require.NoError(t, h.consume(recs...))
	assert.Equal(t, 3, postsAbout(h, "a100"))
	capped := h.auditFor(stepWebhook, audit.DecisionSkipped)
	require.Len(t, capped, 97)
	assert.Equal(t, `webhook cap: source "gpu.xid.13" on node "a100" over max_posts_per_source (3 per 10m0s)`, capped[0].Reason)

	require.NoError(t, h.consume(junkOn("a100", 1000)))
	assert.Equal(t, 4, postsAbout(h, "a100"), "another source on the node")
}

// A capped post is not remembered as sent: the fault's next record is
// posted once the bucket has refilled.
func TestWebhookCappedPostStaysDue(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *dependencies) { c.Webhook.MaxPostsPerNode = 1 })
	first, second := junkOn("b200", 0), junkOn("b200", 1)
	require.NoError(t, h.consume(first, second))
	require.Equal(t, 1, postsAbout(h, "b200"))
	h.clock.Advance(10 * time.Minute)
	require.NoError(t, h.consume(withState(second, fault.StateUpdate)))
	assert.Equal(t, 2, postsAbout(h, "b200"))
	acted := h.auditFor(stepWebhook, audit.DecisionActed)
	require.Len(t, acted, 2)
	assert.Equal(t, second.ID, acted[1].FaultID)
	assert.True(t, strings.HasPrefix(h.auditFor(stepWebhook, audit.DecisionSkipped)[0].Reason, "webhook cap: node"))
}

// Dry run applies the caps as acting would, so its audit shows what would
// be capped.
func TestWebhookCapsInDryRun(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *dependencies) { c.DryRun, c.Webhook.MaxPostsPerNode = true, 2 })
	var recs []fault.Record
	for i := range 5 {
		recs = append(recs, junkOn("c300", i))
	}
	require.NoError(t, h.consume(recs...))
	assert.Empty(t, h.hook.got(), "dry run posts nothing")
	assert.Len(t, h.auditFor(stepWebhook, audit.DecisionDryRun), 2)
	capped := h.auditFor(stepWebhook, audit.DecisionSkipped)
	require.Len(t, capped, 3)
	assert.Equal(t, `webhook cap: node "c300" over max_posts_per_node (2 per 10m0s)`, capped[0].Reason)
}
