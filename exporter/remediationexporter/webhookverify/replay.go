package webhookverify

import (
	"container/heap"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// DefaultCapacity is a Verifier's default bound on remembered delivery ids:
// about 3 MB at most (MaxDeliveryIDLen each plus bookkeeping), and far more
// deliveries than the exporter makes in a window.
const DefaultCapacity = 10000

var (
	// ErrReplay: the delivery id was verified before within the window.
	// The exporter retries a delivery under the same id (with a new
	// timestamp) when an answer is lost, so a receiver should answer a
	// replay 2xx and not act on it again (or 409, which the exporter does
	// not retry, but audits as failed).
	ErrReplay = errors.New("webhookverify: delivery id already seen")
	// ErrUnproven: the store overflowed, and the delivery is no newer
	// than an id it had to drop, so it could be a replay of that one.
	// Answer 503: the exporter retries with a fresh timestamp, which is
	// accepted.
	ErrUnproven = errors.New("webhookverify: replay store overflowed; delivery not newer than a dropped id")
)

// Verifier verifies deliveries like Verify and refuses a delivery id it
// has verified before (ErrReplay). It remembers each id until the newest
// timestamp it has seen the id with leaves the window, when the timestamp
// check refuses a replay of any request it saw anyway, and at most Capacity
// ids: memory stays bounded however many deliveries arrive. Only deliveries with a valid signature are
// remembered, so without the secret nobody can fill the store.
//
// When full it drops the id with the oldest timestamp and refuses from
// then on every delivery whose timestamp is not newer than a dropped one
// (ErrUnproven) until that timestamp leaves the window. That trades
// availability for safety: a replay is never accepted, but in a burst of
// more than Capacity deliveries per window the older-stamped ones are
// refused (retryably) rather than risk a replay.
//
// Safe for concurrent use. A Verifier remembers in memory only: across a
// receiver restart (or behind several replicas) deduplicate on the
// delivery id in the receiver's own store too.
type Verifier struct {
	secret   []byte
	maxSkew  time.Duration
	capacity int

	mu   sync.Mutex
	seen map[string]*seenID
	byTS tsHeap
	// floor is the newest timestamp dropped for room; hasFloor: one was.
	floor    int64
	hasFloor bool
}

// NewVerifier returns a Verifier for secret accepting timestamps within
// maxSkew of now and remembering at most capacity ids. maxSkew <= 0 is
// DefaultMaxSkew, capacity <= 0 is DefaultCapacity.
func NewVerifier(secret []byte, maxSkew time.Duration, capacity int) *Verifier {
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Verifier{
		secret: append([]byte(nil), secret...), maxSkew: maxSkew, capacity: capacity,
		seen: make(map[string]*seenID), byTS: make(tsHeap, 0, min(capacity, 1024)),
	}
}

// MaxSkew is how far from now a timestamp may be.
func (v *Verifier) MaxSkew() time.Duration { return v.maxSkew }

// Capacity is the most delivery ids remembered at once.
func (v *Verifier) Capacity() int { return v.capacity }

// Len is the number of delivery ids remembered now.
func (v *Verifier) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}

// Verify checks the signature and the timestamp, refuses a delivery id seen
// before (ErrReplay) and remembers this one. Check and remember are one
// step, so two copies of a delivery arriving together pass once.
func (v *Verifier) Verify(header http.Header, body []byte, now time.Time) (Delivery, error) {
	d, err := verify(v.secret, header, body, now, v.maxSkew)
	if err != nil {
		return d, err
	}
	ts := d.Timestamp.Unix()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.expire(now)
	if s, ok := v.seen[d.ID]; ok {
		// Authentic (signed) and newer: a retry. Remember the id until this
		// request too has left the window, so it cannot be replayed later.
		if ts > s.ts {
			s.ts = ts
			heap.Fix(&v.byTS, s.index)
		}
		return d, fmt.Errorf("%w: %s", ErrReplay, d.ID)
	}
	if v.hasFloor && ts <= v.floor {
		return d, ErrUnproven
	}
	if len(v.seen) >= v.capacity {
		oldest := heap.Pop(&v.byTS).(*seenID)
		delete(v.seen, oldest.id)
		if !v.hasFloor || oldest.ts > v.floor {
			v.floor, v.hasFloor = oldest.ts, true
		}
	}
	s := &seenID{id: d.ID, ts: ts}
	heap.Push(&v.byTS, s)
	v.seen[d.ID] = s
	return d, nil
}

// Forget drops id, so that a retry of it is accepted: for a receiver that
// verified a delivery but failed to act on it and answered 5xx.
func (v *Verifier) Forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.seen[id]; ok {
		heap.Remove(&v.byTS, s.index)
		delete(v.seen, id)
	}
}

// expire drops ids whose timestamp has left the window: a replay of them
// fails the timestamp check now. Callers hold v.mu.
func (v *Verifier) expire(now time.Time) {
	for len(v.byTS) > 0 && outside(v.byTS[0].ts, now, v.maxSkew) && now.After(time.Unix(v.byTS[0].ts, 0)) {
		s := heap.Pop(&v.byTS).(*seenID)
		delete(v.seen, s.id)
	}
	if v.hasFloor && outside(v.floor, now, v.maxSkew) && now.After(time.Unix(v.floor, 0)) {
		v.hasFloor = false
	}
}

// seenID is a remembered delivery id and its timestamp.
type seenID struct {
	id    string
	ts    int64
	index int // in tsHeap, for Forget
}

// tsHeap orders remembered ids by timestamp, oldest first.
type tsHeap []*seenID

func (h tsHeap) Len() int           { return len(h) }
func (h tsHeap) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h tsHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *tsHeap) Push(x any) {
	s := x.(*seenID)
	s.index = len(*h)
	*h = append(*h, s)
}

func (h *tsHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil // no reference kept past the length
	*h = old[:len(old)-1]
	return s
}
