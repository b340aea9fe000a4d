package ratelimitprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// passes takes n tokens from key's bucket at now and returns how many it got.
func passes(tb *bucketTable, key string, now time.Time, n int) int {
	b, _ := tb.get(key, now.UnixNano())
	got := 0
	for i := 0; i < n; i++ {
		if b.take() {
			got++
		}
	}
	return got
}

func TestTokenMath(t *testing.T) {
	tb := newBucketTable(10, 5, 100) // 10/s, burst 5
	now := t0
	assert.Equal(t, 5, passes(tb, "a", now, 10), "a new key starts full")
	now = now.Add(100 * time.Millisecond)
	assert.Equal(t, 1, passes(tb, "a", now, 10), "100 ms at 10/s earns one token")
	now = now.Add(250 * time.Millisecond)
	assert.Equal(t, 2, passes(tb, "a", now, 10), "2.5 tokens: two pass, half a token kept")
	now = now.Add(50 * time.Millisecond)
	assert.Equal(t, 1, passes(tb, "a", now, 10), "the kept half and 50 ms make one")
	assert.Equal(t, 0, passes(tb, "a", now.Add(-time.Hour), 10), "a clock that went back earns nothing")
	now = now.Add(time.Hour)
	assert.Equal(t, 5, passes(tb, "a", now, 10), "a long pause refills only to burst")
	assert.Equal(t, 5, passes(tb, "b", now, 10), "buckets are per key")
}

func TestBucketTableEvictsLeastRecentlyUsed(t *testing.T) {
	tb := newBucketTable(1, 1, 2)
	_, ev := tb.get("a", 0)
	assert.Zero(t, ev)
	_, ev = tb.get("b", 0)
	assert.Zero(t, ev)
	_, ev = tb.get("a", 0) // a is now the most recent
	assert.Zero(t, ev)
	_, ev = tb.get("c", 0)
	assert.Equal(t, 1, ev)
	require.Equal(t, 2, tb.len())
	assert.Contains(t, tb.byKey, "a")
	assert.Contains(t, tb.byKey, "c")
	assert.NotContains(t, tb.byKey, "b", "b was the least recently used")

	// The list stays consistent through many insertions and touches.
	tb = newBucketTable(1, 1, 3)
	for i := 0; i < 100; i++ {
		tb.get(string(rune('a'+i%7)), int64(i))
		tb.get("a", int64(i))
		require.LessOrEqual(t, tb.len(), 3)
	}
	n := 0
	for b := tb.head; b != nil; b = b.next {
		require.Same(t, b, tb.byKey[b.key])
		if b.next != nil {
			require.Same(t, b, b.next.prev)
		}
		n++
	}
	assert.Equal(t, tb.len(), n)
	assert.Equal(t, "a", tb.head.key)
}

// protectedPasses charges n protected items to key's bucket at now with
// the given reserve and returns how many passed.
func protectedPasses(tb *bucketTable, key string, now time.Time, reserve float64, n int) int {
	b, _ := tb.get(key, now.UnixNano())
	got := 0
	for i := 0; i < n; i++ {
		if b.canProtected(reserve) {
			b.takeProtected(reserve)
			got++
		}
	}
	return got
}

func TestProtectedDebtRepaidBeforeTokens(t *testing.T) {
	tb := newBucketTable(10, 5, 100) // 10/s, burst 5
	now := t0
	assert.Equal(t, 3, protectedPasses(tb, "a", now, 3, 3), "the reserve first")
	assert.Equal(t, 5, passes(tb, "a", now, 10), "the tokens stay for unprotected items")
	assert.Equal(t, 0, protectedPasses(tb, "a", now, 3, 10), "reserve and tokens spent")

	now = now.Add(200 * time.Millisecond) // 2 tokens earned: both repay debt
	assert.Equal(t, 0, passes(tb, "a", now, 10), "the debt is repaid before tokens accrue")
	assert.Equal(t, 2, protectedPasses(tb, "a", now, 3, 10), "the repaid part of the reserve is free again")

	now = now.Add(time.Second) // 10 earned: 3 repay the debt, 5 fill the bucket
	assert.Equal(t, 5, passes(tb, "a", now, 10))
	assert.Equal(t, 3, protectedPasses(tb, "a", now, 3, 10))
	assert.Equal(t, 5, protectedPasses(tb, "b", now, 0, 10), "no reserve: tokens only")
}
