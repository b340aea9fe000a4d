package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"

import (
	"crypto/sha256"
	"sync"
	"time"
)

// verdict is what a review said about one token: the node it speaks for,
// or why it was refused.
type verdict struct {
	node, subject string
	refusal       string // a metadata.Reason*; empty: authenticated
	detail        string // for the refusal's message
}

// reviewCache holds verdicts for a bounded time and number of tokens,
// keyed by the token's SHA-256 digest. When full, the oldest entry goes
// (first in, first out: a token reviewed again is inserted again).
type reviewCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]cached
	order   [][sha256.Size]byte // insertion order, a ring of len max
	next    int
	max     int
}

type cached struct {
	v       verdict
	expires time.Time
	slot    int
}

func newReviewCache(size int) *reviewCache {
	return &reviewCache{entries: make(map[[sha256.Size]byte]cached, min(size, 1024)), order: make([][sha256.Size]byte, size), max: size}
}

// get returns the verdict for key if it has not expired at now.
func (c *reviewCache) get(key [sha256.Size]byte, now time.Time) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return verdict{}, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, key)
		return verdict{}, false
	}
	return e.v, true
}

// put holds v for key until expires, evicting the oldest entry when full.
func (c *reviewCache) put(key [sha256.Size]byte, v verdict, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		// Keep its slot: the ring never holds a key twice.
		c.entries[key] = cached{v: v, expires: expires, slot: old.slot}
		return
	}
	slot := c.next
	c.next = (c.next + 1) % c.max
	if victim, ok := c.entries[c.order[slot]]; ok && victim.slot == slot {
		delete(c.entries, c.order[slot])
	}
	c.order[slot] = key
	c.entries[key] = cached{v: v, expires: expires, slot: slot}
}

// len is the number of tokens held.
func (c *reviewCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
