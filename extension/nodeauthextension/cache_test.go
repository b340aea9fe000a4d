package nodeauthextension

import (
	"crypto/sha256"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReviewCacheExpiresAndBounds(t *testing.T) {
	c := newReviewCache(3)
	t0 := time.Unix(1_700_000_000, 0)
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte(strconv.Itoa(i))) }

	c.put(key(0), verdict{node: "n0"}, t0.Add(time.Second))
	v, ok := c.get(key(0), t0)
	require.True(t, ok)
	assert.Equal(t, "n0", v.node)
	_, ok = c.get(key(0), t0.Add(time.Second))
	assert.False(t, ok, "held past its expiry")
	assert.Zero(t, c.len(), "an expired entry is dropped when read")

	// Never more than 3: the oldest goes first.
	for i := 1; i <= 5; i++ {
		c.put(key(i), verdict{node: "n" + strconv.Itoa(i)}, t0.Add(time.Hour))
		assert.LessOrEqual(t, c.len(), 3)
	}
	for i := 1; i <= 5; i++ {
		_, ok := c.get(key(i), t0)
		assert.Equal(t, i >= 3, ok, "key %d", i)
	}
	// A key put again keeps one slot: putting 2 more evicts 3 and 4, not it.
	c.put(key(5), verdict{node: "n5 again"}, t0.Add(time.Hour))
	c.put(key(6), verdict{}, t0.Add(time.Hour))
	c.put(key(7), verdict{}, t0.Add(time.Hour))
	assert.Equal(t, 3, c.len())
	v, ok = c.get(key(5), t0)
	require.True(t, ok)
	assert.Equal(t, "n5 again", v.node)
}
