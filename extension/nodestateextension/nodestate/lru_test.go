package nodestate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLRUOrder(t *testing.T) {
	l := newLRU[int]()
	_, ok := l.oldest()
	assert.False(t, ok)
	l.removeOldest() // empty: nothing happens

	l.touch("a", 1, at(1))
	l.touch("b", 2, at(2))
	l.touch("c", 3, at(3))
	l.touch("a", 10, at(4)) // a is recorded again: now the newest, with its new value

	seen, ok := l.oldest()
	require.True(t, ok)
	assert.Equal(t, at(2), seen)

	var order []int
	l.each(func(v int) { order = append(order, v) })
	assert.Equal(t, []int{10, 3, 2}, order)

	l.removeOldest()
	_, ok = l.get("b")
	assert.False(t, ok)
	v, ok := l.get("a")
	require.True(t, ok)
	assert.Equal(t, 10, v)
	assert.Equal(t, 2, l.len())
	seen, _ = l.oldest()
	assert.Equal(t, at(3), seen)
	assert.Equal(t, time.UTC, seen.Location())
}
