package webhook

import (
	"fmt"
	"sync"
	"time"
)

// Reasons a post is capped: the telemetry attribute "reason" (bounded: the
// node is in the audit entry, never in a metric attribute).
const (
	CapNode   = "node"
	CapSource = "source"
	CapPage   = "page"
)

// Post is what the limiter knows of one post.
type Post struct {
	// Node is the node the post is about ("" for job-level faults: one
	// bucket of its own).
	Node string
	// Source is what raised it on that node: the fault type, with the XID
	// code for gpu.xid (fault.Record.IDType), so XID 13 noise does not use
	// up XID 79's posts.
	Source string
	// Page: a P1 post (route page). It draws from its own bucket per node
	// and skips the source and node caps, so lower severities never starve
	// a page.
	Page bool
}

// Verdict is the limiter's answer for one post.
type Verdict struct {
	OK bool
	// Cap is CapNode, CapSource or CapPage when !OK.
	Cap string
	// Reason names the key and the limit, for the audit entry.
	Reason string
	// First: the first refusal by this bucket since it last admitted a
	// post, so a flood is logged once, not once per post.
	First bool
}

// bucket is a token bucket of capacity max, refilled at max per window.
type bucket struct {
	tokens   float64
	last     time.Time
	refusing bool
}

func (b *bucket) refill(now time.Time, max int, window time.Duration) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(float64(max), b.tokens+float64(max)*float64(el)/float64(window))
	}
	b.last = now
}

// Limiter caps posts per node, per source on a node, and pages per node,
// each with a token bucket refilled over Config.PerNodeWindow. A zero
// maximum is no cap. Safe for concurrent use.
type Limiter struct {
	cfg Config
	now func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket // by kind + "\x00" + node (+ "\x00" + source)
	lastSweep time.Time
}

// NewLimiter returns the limiter of cfg's caps, reading time from now.
func NewLimiter(cfg Config, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{cfg: cfg, now: now, buckets: map[string]*bucket{}, lastSweep: now()}
}

// Admit takes a token for p from every bucket it draws on, or from none
// when one of them is empty.
func (l *Limiter) Admit(p Post) Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	type draw struct {
		key, cap, reason string
		max              int
	}
	var draws []draw
	w := l.cfg.PerNodeWindow
	if p.Page {
		draws = append(draws, draw{CapPage + "\x00" + p.Node, CapPage,
			fmt.Sprintf("webhook cap: node %q over max_pages_per_node (%d per %s)", p.Node, l.cfg.MaxPagesPerNode, w), l.cfg.MaxPagesPerNode})
	} else {
		draws = append(draws,
			draw{CapSource + "\x00" + p.Node + "\x00" + p.Source, CapSource,
				fmt.Sprintf("webhook cap: source %q on node %q over max_posts_per_source (%d per %s)", p.Source, p.Node, l.cfg.MaxPostsPerSource, w), l.cfg.MaxPostsPerSource},
			draw{CapNode + "\x00" + p.Node, CapNode,
				fmt.Sprintf("webhook cap: node %q over max_posts_per_node (%d per %s)", p.Node, l.cfg.MaxPostsPerNode, w), l.cfg.MaxPostsPerNode})
	}
	taken := make([]*bucket, 0, len(draws))
	for _, d := range draws {
		if d.max <= 0 {
			continue
		}
		b, ok := l.buckets[d.key]
		if !ok {
			b = &bucket{tokens: float64(d.max), last: now}
			l.buckets[d.key] = b
		}
		b.refill(now, d.max, w)
		if b.tokens < 1 {
			// Nothing taken from any bucket: a capped source does not use
			// up its node's posts.
			first := !b.refusing
			b.refusing = true
			return Verdict{Cap: d.cap, Reason: d.reason, First: first}
		}
		taken = append(taken, b)
	}
	for _, b := range taken {
		b.tokens--
		b.refusing = false
	}
	return Verdict{OK: true}
}

// sweep forgets, once per window, the buckets that have refilled: a full
// bucket is what a new one would be, so memory is bounded by the keys
// posted about in the last two windows.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.cfg.PerNodeWindow {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if now.Sub(b.last) >= l.cfg.PerNodeWindow {
			delete(l.buckets, k)
		}
	}
}

// size is the number of buckets held (tests).
func (l *Limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
