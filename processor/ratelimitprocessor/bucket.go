package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"

// bucket is one key's token bucket, also a node of its table's
// least-recently-used list.
type bucket struct {
	key string
	// label is the dropped_items key of a node bucket's drops, made on
	// its first drop.
	label  string
	tokens float64
	// debt is what protected items took beyond the tokens, at most the
	// protected reserve; the refill repays it before it adds tokens.
	debt float64
	last int64 // unix nanoseconds of the last refill
	// warned: the first drop of this bucket's life was logged; later drops
	// are only counted, so a runaway key logs once, not once a batch.
	warned     bool
	prev, next *bucket
}

// take spends one token when there is one.
func (b *bucket) take() bool {
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// canProtected reports whether a protected item may pass: by a debt
// within reserve (first, so the tokens stay for unprotected items of the
// same batch), else by a token.
func (b *bucket) canProtected(reserve float64) bool { return b.debt+1 <= reserve || b.tokens >= 1 }

// takeProtected charges a protected item that canProtected admitted.
func (b *bucket) takeProtected(reserve float64) {
	if b.debt+1 <= reserve {
		b.debt++
		return
	}
	b.tokens--
}

// refill adds the tokens earned since the last refill, up to burst. A clock
// that went backwards earns nothing and restarts from now.
func (b *bucket) refill(now int64, rate, burst float64) {
	if elapsed := now - b.last; elapsed > 0 {
		earned := float64(elapsed) * rate / 1e9
		repaid := min(b.debt, earned)
		b.debt -= repaid
		b.tokens = min(burst, b.tokens+earned-repaid)
	}
	b.last = now
}

// bucketTable holds at most maxKeys buckets, evicting the least recently
// used. Not safe for concurrent use: the processor holds its lock.
type bucketTable struct {
	rate, burst float64
	maxKeys     int
	byKey       map[string]*bucket
	// head is the most recently used bucket, tail the least.
	head, tail *bucket
}

func newBucketTable(rate float64, burst, maxKeys int) *bucketTable {
	return &bucketTable{rate: rate, burst: float64(burst), maxKeys: maxKeys, byKey: map[string]*bucket{}}
}

// get returns key's bucket refilled to now, creating it full when new, and
// how many buckets it evicted to make room (0 or 1).
func (t *bucketTable) get(key string, now int64) (*bucket, int) {
	if b, ok := t.byKey[key]; ok {
		t.moveToFront(b)
		b.refill(now, t.rate, t.burst)
		return b, 0
	}
	evicted := 0
	for len(t.byKey) >= t.maxKeys && t.tail != nil {
		t.remove(t.tail)
		evicted++
	}
	// A new key starts with a full bucket: a job's first burst passes.
	b := &bucket{key: key, tokens: t.burst, last: now}
	t.byKey[key] = b
	t.pushFront(b)
	return b, evicted
}

func (t *bucketTable) len() int { return len(t.byKey) }

func (t *bucketTable) pushFront(b *bucket) {
	b.prev, b.next = nil, t.head
	if t.head != nil {
		t.head.prev = b
	}
	t.head = b
	if t.tail == nil {
		t.tail = b
	}
}

func (t *bucketTable) unlink(b *bucket) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		t.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		t.tail = b.prev
	}
	b.prev, b.next = nil, nil
}

func (t *bucketTable) moveToFront(b *bucket) {
	if t.head == b {
		return
	}
	t.unlink(b)
	t.pushFront(b)
}

func (t *bucketTable) remove(b *bucket) {
	t.unlink(b)
	delete(t.byKey, b.key)
}
