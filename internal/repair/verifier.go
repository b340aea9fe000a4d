package repair

import (
	"container/heap"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultReplayCapacity is a Verifier's default bound on remembered request
// ids: about 20 MB at most (MaxIDLen each plus bookkeeping), and far more
// requests than a gateway sends one node in a window (a repair is a
// handful of requests and a poll every few seconds: some hundreds per
// window).
const DefaultReplayCapacity = 100_000

// Verifier checks signed requests: the signature by one of its public
// keys, the timestamp within the skew, and a request id not seen before in
// the window. It remembers each accepted id until its timestamp has left
// the window (from then on the timestamp check refuses a replay anyway),
// and at most a capacity of ids: when that many are in the window a new
// request is refused with ErrReplayFull (fail closed: an id is never
// forgotten while a replay of it could pass). Only requests with a valid
// signature are remembered, so nobody without the gateway's key can fill
// the cache. Safe for concurrent use.
//
// The cache is in memory: after an agent restart a request captured in
// the last window could be replayed once. The jobs it would start are
// idempotent by their own id, and a GPU reset still needs an idle GPU.
type Verifier struct {
	keys     []ed25519.PublicKey
	maxSkew  time.Duration
	capacity int

	mu   sync.Mutex
	seen map[string]*seenID
	byTS tsHeap
}

// NewVerifier returns a Verifier accepting a signature by any of keys (more
// than one during a key rotation), timestamps within maxSkew of now
// (<= 0: DefaultMaxSkew) and remembering at most capacity ids (<= 0:
// DefaultReplayCapacity).
func NewVerifier(keys []ed25519.PublicKey, maxSkew time.Duration, capacity int) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("repair: a verifier needs at least one public key")
	}
	for i, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("repair: public key %d has %d bytes, an Ed25519 key %d", i, len(k), ed25519.PublicKeySize)
		}
	}
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	if capacity <= 0 {
		capacity = DefaultReplayCapacity
	}
	return &Verifier{
		keys: append([]ed25519.PublicKey(nil), keys...), maxSkew: maxSkew, capacity: capacity,
		seen: make(map[string]*seenID), byTS: make(tsHeap, 0, min(capacity, 1024)),
	}, nil
}

// MaxSkew is how far from now a timestamp may be.
func (v *Verifier) MaxSkew() time.Duration { return v.maxSkew }

// Len is the number of request ids remembered now.
func (v *Verifier) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}

// Verify checks a request: method and requestURI as received (r.Method,
// r.URL.RequestURI()), its headers and its whole body. It checks the
// signature first (nothing of an unauthenticated request is trusted), then
// the timestamp, then the request id, and remembers the id: check and
// remember are one step, so two copies arriving together pass once. The
// caller checks Signed.Node against its own node.
func (v *Verifier) Verify(method, requestURI string, header http.Header, body []byte, now time.Time) (Signed, error) {
	h, err := parseHeaders(header)
	if err != nil {
		return Signed{}, err
	}
	if strings.ContainsAny(method, "\r\n") || strings.ContainsAny(requestURI, "\r\n") {
		return Signed{}, malformed("request line", "has a line break")
	}
	msg := signedString(method, requestURI, h.node, h.timestamp, h.id, body)
	ok := false
	for _, k := range v.keys {
		if ed25519.Verify(k, msg, h.sig) {
			ok = true
			break
		}
	}
	if !ok {
		return Signed{}, ErrSignature
	}
	s := Signed{Node: h.node, RequestID: h.id, Timestamp: time.Unix(h.unix, 0).UTC()}
	if outside(h.unix, now, v.maxSkew) {
		return s, fmt.Errorf("%w: %s is %s from now", ErrStale, s.Timestamp.UTC().Format(time.RFC3339), now.Sub(s.Timestamp).Round(time.Second))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.expire(now)
	if e, seen := v.seen[h.id]; seen {
		// Signed again with a newer timestamp: remember the id until this
		// request too has left the window, or it could be replayed then.
		if h.unix > e.ts {
			e.ts = h.unix
			heap.Fix(&v.byTS, e.index)
		}
		return s, fmt.Errorf("%w: %s", ErrReplay, h.id)
	}
	if len(v.seen) >= v.capacity {
		return s, ErrReplayFull
	}
	e := &seenID{id: h.id, ts: h.unix}
	heap.Push(&v.byTS, e)
	v.seen[h.id] = e
	return s, nil
}

// expire drops the ids whose timestamp has left the window (older than
// maxSkew): a replay of them is stale now. Callers hold v.mu.
func (v *Verifier) expire(now time.Time) {
	for len(v.byTS) > 0 && now.Sub(time.Unix(v.byTS[0].ts, 0)) > v.maxSkew {
		e := heap.Pop(&v.byTS).(*seenID)
		delete(v.seen, e.id)
	}
}

// seenID is a remembered request id and its timestamp.
type seenID struct {
	id    string
	ts    int64
	index int
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
	e := x.(*seenID)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *tsHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
