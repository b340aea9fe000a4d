package nodestate // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"

import (
	"container/list"
	"time"
)

// lru holds the GPUs or ports of the store, ordered by when each was last
// recorded, so that the least recently recorded is evicted first.
type lru[V any] struct {
	items map[string]*list.Element // values are *lruEntry[V]
	order *list.List               // front: most recently recorded
}

type lruEntry[V any] struct {
	key      string
	val      V
	lastSeen time.Time
}

func newLRU[V any]() *lru[V] {
	return &lru[V]{items: map[string]*list.Element{}, order: list.New()}
}

func (l *lru[V]) len() int { return len(l.items) }

// get returns the value of key without changing the order.
func (l *lru[V]) get(key string) (V, bool) {
	e, ok := l.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	return e.Value.(*lruEntry[V]).val, true
}

// touch stores val under key, or marks an existing key, as recorded at now.
func (l *lru[V]) touch(key string, val V, now time.Time) {
	if e, ok := l.items[key]; ok {
		ent := e.Value.(*lruEntry[V])
		ent.val, ent.lastSeen = val, now
		l.order.MoveToFront(e)
		return
	}
	l.items[key] = l.order.PushFront(&lruEntry[V]{key: key, val: val, lastSeen: now})
}

// oldest returns when the least recently recorded entry was recorded.
func (l *lru[V]) oldest() (time.Time, bool) {
	e := l.order.Back()
	if e == nil {
		return time.Time{}, false
	}
	return e.Value.(*lruEntry[V]).lastSeen, true
}

// removeOldest forgets the least recently recorded entry.
func (l *lru[V]) removeOldest() {
	e := l.order.Back()
	if e == nil {
		return
	}
	l.order.Remove(e)
	delete(l.items, e.Value.(*lruEntry[V]).key)
}

// each calls fn for every value, most recently recorded first.
func (l *lru[V]) each(fn func(V)) {
	for e := l.order.Front(); e != nil; e = e.Next() {
		fn(e.Value.(*lruEntry[V]).val)
	}
}

// lastSeen returns when key was last recorded.
func (l *lru[V]) lastSeen(key string) (time.Time, bool) {
	e, ok := l.items[key]
	if !ok {
		return time.Time{}, false
	}
	return e.Value.(*lruEntry[V]).lastSeen, true
}

// countSince counts the entries recorded at or after t; the order is by
// recording time, so it stops at the first older one.
func (l *lru[V]) countSince(t time.Time) int {
	n := 0
	for e := l.order.Front(); e != nil && !e.Value.(*lruEntry[V]).lastSeen.Before(t); e = e.Next() {
		n++
	}
	return n
}
