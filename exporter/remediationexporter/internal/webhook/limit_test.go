package webhook

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
)

// manualClock is the limiter's injectable time.
type manualClock struct{ t time.Time }

func (c *manualClock) now() time.Time          { return c.t }
func (c *manualClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newManualClock() *manualClock {
	return &manualClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
}

func capsConfig(node, source, pages int) Config {
	c := NewDefaultConfig()
	c.MaxPostsPerNode, c.MaxPostsPerSource, c.MaxPagesPerNode = node, source, pages
	return c
}

// admitted counts the posts of p admitted out of n.
func admitted(l *Limiter, p Post, n int) int {
	ok := 0
	for range n {
		if l.Admit(p).OK {
			ok++
		}
	}
	return ok
}

func TestLimiterCapsPerNode(t *testing.T) {
	clk := newManualClock()
	l := NewLimiter(capsConfig(3, 0, 0), clk.now)
	for i := range 3 {
		assert.True(t, l.Admit(Post{Node: "a", Source: fmt.Sprintf("gpu.xid.%d", i)}).OK)
	}
	v := l.Admit(Post{Node: "a", Source: "gpu.xid.99"})
	assert.False(t, v.OK)
	assert.Equal(t, CapNode, v.Cap)
	assert.Equal(t, `webhook cap: node "a" over max_posts_per_node (3 per 10m0s)`, v.Reason)
	assert.True(t, v.First, "the first refusal of a flood is logged")
	assert.False(t, l.Admit(Post{Node: "a", Source: "gpu.xid.99"}).First, "the rest are not")
	assert.True(t, l.Admit(Post{Node: "b", Source: "gpu.xid.99"}).OK, "another node has its own bucket")
}

// 10,000 posts' worth of faults from one node, over every source it has,
// do not stop a post about another node, nor a page about itself.
func TestLimiterOneNodeCannotCrowdOutOthers(t *testing.T) {
	clk := newManualClock()
	l := NewLimiter(NewDefaultConfig(), clk.now)
	ok := 0
	for i := range 10_000 {
		if l.Admit(Post{Node: "noisy", Source: fmt.Sprintf("gpu.xid.%d", i%200)}).OK {
			ok++
		}
	}
	assert.Equal(t, 20, ok, "max_posts_per_node")
	assert.True(t, l.Admit(Post{Node: "quiet", Source: "gpu.xid.43"}).OK)
	assert.True(t, l.Admit(Post{Node: "noisy", Source: "gpu.memory.dbe", Page: true}).OK, "pages have their own bucket")
}

func TestLimiterCapsPerSource(t *testing.T) {
	clk := newManualClock()
	l := NewLimiter(capsConfig(10, 2, 0), clk.now)
	noisy := Post{Node: "a", Source: "gpu.xid.13"}
	assert.Equal(t, 2, admitted(l, noisy, 50))
	v := l.Admit(noisy)
	assert.Equal(t, CapSource, v.Cap)
	assert.Equal(t, `webhook cap: source "gpu.xid.13" on node "a" over max_posts_per_source (2 per 10m0s)`, v.Reason)
	// The 48 refused posts took nothing from the node: 8 left of 10.
	assert.Equal(t, 2, admitted(l, Post{Node: "a", Source: "gpu.xid.79"}, 5))
	assert.Equal(t, 2, admitted(l, Post{Node: "a", Source: "nvlink.degraded"}, 5))
	assert.Equal(t, 2, admitted(l, Post{Node: "a", Source: "gpu.thermal"}, 5))
	assert.Equal(t, 2, admitted(l, Post{Node: "a", Source: "gpu.unresponsive"}, 5))
	v = l.Admit(Post{Node: "a", Source: "gpu.memory.sbe"})
	assert.Equal(t, CapNode, v.Cap, "10 posts about the node: its own cap now")
}

func TestLimiterPagesHaveTheirOwnBucket(t *testing.T) {
	clk := newManualClock()
	l := NewLimiter(capsConfig(1, 1, 2), clk.now)
	assert.True(t, l.Admit(Post{Node: "a", Source: "gpu.xid.43"}).OK)
	assert.False(t, l.Admit(Post{Node: "a", Source: "gpu.xid.43"}).OK)
	page := Post{Node: "a", Source: "gpu.memory.dbe", Page: true}
	assert.Equal(t, 2, admitted(l, page, 5), "pages ignore the node and source caps, not their own")
	v := l.Admit(page)
	assert.Equal(t, CapPage, v.Cap)
	assert.Equal(t, `webhook cap: node "a" over max_pages_per_node (2 per 10m0s)`, v.Reason)
	// No page cap: pages are never refused.
	l = NewLimiter(capsConfig(1, 1, 0), clk.now)
	assert.Equal(t, 100, admitted(l, page, 100))
}

func TestLimiterRefillsOverTheWindow(t *testing.T) {
	clk := newManualClock()
	cfg := capsConfig(4, 0, 0)
	cfg.PerNodeWindow = time.Minute
	l := NewLimiter(cfg, clk.now)
	p := Post{Node: "a", Source: "gpu.xid.43"}
	require.Equal(t, 4, admitted(l, p, 10))
	clk.advance(30 * time.Second)
	assert.Equal(t, 2, admitted(l, p, 10), "half a window: half the bucket")
	clk.advance(time.Minute)
	assert.Equal(t, 4, admitted(l, p, 10), "after a window: the whole cap, no more")
	clk.advance(time.Hour)
	assert.Equal(t, 4, admitted(l, p, 10), "an idle bucket does not save up")
	clk.advance(time.Minute)
	require.Equal(t, 4, admitted(l, p, 4))
	assert.True(t, l.Admit(p).First, "refusing again after admitting: logged again")
}

func TestLimiterForgetsIdleBuckets(t *testing.T) {
	clk := newManualClock()
	l := NewLimiter(NewDefaultConfig(), clk.now)
	for i := range 1000 {
		l.Admit(Post{Node: fmt.Sprintf("n%04d", i), Source: "gpu.xid.43"})
	}
	assert.Equal(t, 2000, l.size(), "a node and a source bucket per node")
	clk.advance(10 * time.Minute)
	l.Admit(Post{Node: "late", Source: "gpu.xid.43"})
	assert.Equal(t, 2, l.size(), "buckets full again are forgotten")
}

func TestConfigValidateCaps(t *testing.T) {
	base := NewDefaultConfig()
	require.NoError(t, base.Validate())
	for name, tc := range map[string]struct {
		mut  func(*Config)
		want string
	}{
		"negative node":   {func(c *Config) { c.MaxPostsPerNode = -1 }, "webhook.max_posts_per_node -1 must not be negative (0: no cap)"},
		"negative source": {func(c *Config) { c.MaxPostsPerSource = -2 }, "webhook.max_posts_per_source -2 must not be negative (0: no cap)"},
		"negative pages":  {func(c *Config) { c.MaxPagesPerNode = -3 }, "webhook.max_pages_per_node -3 must not be negative (0: no cap)"},
		"no window":       {func(c *Config) { c.PerNodeWindow = 0 }, "webhook.per_node_window 0s must be positive with a cap set"},
	} {
		t.Run(name, func(t *testing.T) {
			c := base
			tc.mut(&c)
			assert.EqualError(t, c.Validate(), tc.want)
		})
	}
	noCaps := capsConfig(0, 0, 0)
	noCaps.PerNodeWindow = 0
	assert.NoError(t, noCaps.Validate(), "no cap, no window needed")
}

// A refused post is counted by reason, never by node, and sends nothing.
func TestClientAdmitCountsCappedPosts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	set := componenttest.NewNopTelemetrySettings()
	set.MeterProvider = mp
	recv := newReceiver(0, time.Now())
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	clk := newManualClock()
	cfg := capsConfig(2, 1, 1)
	cfg.Endpoint, cfg.Secret, cfg.Insecure = srv.URL, secret, true
	tb, err := metadata.NewTelemetryBuilder(set)
	require.NoError(t, err)
	c := New(cfg, Options{Now: clk.now, PostsCapped: tb.RemediationWebhookPostsCapped})
	t.Cleanup(c.Close)

	ctx := context.Background()
	for range 3 {
		c.Admit(ctx, Post{Node: "a", Source: "gpu.xid.43"}) // 1 ok, 2 source
	}
	c.Admit(ctx, Post{Node: "a", Source: "gpu.xid.45"}) // ok
	c.Admit(ctx, Post{Node: "a", Source: "gpu.xid.48"}) // node
	for range 2 {
		c.Admit(ctx, Post{Node: "a", Source: "gpu.memory.dbe", Page: true}) // 1 ok, 1 page
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	require.Len(t, rm.ScopeMetrics[0].Metrics, 1)
	m := rm.ScopeMetrics[0].Metrics[0]
	assert.Equal(t, "otelcol_remediation_webhook_posts_capped", m.Name)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	got := map[string]int64{}
	for _, dp := range sum.DataPoints {
		require.Equal(t, 1, dp.Attributes.Len(), "reason only")
		reason, _ := dp.Attributes.Value(attribute.Key(metadata.TelemetryAttrReason))
		got[reason.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{CapSource: 2, CapNode: 1, CapPage: 1}, got)
	assert.Zero(t, recv.attempts, "admitting sends nothing")

	// Without any cap every post is admitted.
	cfg = capsConfig(0, 0, 0)
	cfg.Endpoint, cfg.Secret, cfg.Insecure = srv.URL, secret, true
	free := New(cfg, Options{Now: clk.now})
	t.Cleanup(free.Close)
	for range 1000 {
		require.True(t, free.Admit(ctx, Post{Node: "a", Source: "gpu.xid.43"}).OK)
	}
}
