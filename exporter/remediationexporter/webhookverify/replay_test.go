package webhookverify

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifierRefusesAReplay(t *testing.T) {
	v := NewVerifier(secret, 0, 0)
	assert.Equal(t, DefaultMaxSkew, v.MaxSkew())
	assert.Equal(t, DefaultCapacity, v.Capacity())
	h := signed(at, deliveryID, body)
	_, err := v.Verify(h, body, at)
	require.NoError(t, err)
	_, err = v.Verify(h, body, at.Add(time.Minute))
	assert.ErrorIs(t, err, ErrReplay, "the captured request again")
	// The exporter's retry: same id, fresh timestamp and signature.
	_, err = v.Verify(signed(at.Add(2*time.Second), deliveryID, body), body, at.Add(2*time.Second))
	assert.ErrorIs(t, err, ErrReplay, "a retry of a delivery already taken")
	// Once its timestamp has left the window the id is forgotten, and the
	// captured request fails the timestamp check instead.
	_, err = v.Verify(h, body, at.Add(DefaultMaxSkew+time.Second))
	assert.ErrorIs(t, err, ErrStale)
	_, err = v.Verify(signed(at.Add(2*time.Second), deliveryID, body), body, at.Add(DefaultMaxSkew+time.Second))
	assert.ErrorIs(t, err, ErrReplay, "remembered until the newest request seen with it leaves the window")
}

func TestVerifierStillChecksSignatureAndWindow(t *testing.T) {
	v := NewVerifier(secret, time.Minute, 10)
	h := signed(at, deliveryID, body)
	newID := h.Clone()
	newID.Set(HeaderDelivery, "a07573c9c14f1fae/resolved/notify")
	_, err := v.Verify(newID, body, at)
	assert.ErrorIs(t, err, ErrSignature, "same body, new id, old signature")
	_, err = v.Verify(h, body, at.Add(time.Minute+time.Second))
	assert.ErrorIs(t, err, ErrStale, "its MaxSkew, not the default")
	assert.Zero(t, v.Len(), "refused deliveries are not remembered")
	_, err = v.Verify(h, body, at)
	assert.NoError(t, err, "a valid delivery passes")
}

func TestVerifierForgetLetsARetryThrough(t *testing.T) {
	v := NewVerifier(secret, 0, 0)
	_, err := v.Verify(signed(at, deliveryID, body), body, at)
	require.NoError(t, err)
	v.Forget(deliveryID) // the receiver failed to act and answered 503
	_, err = v.Verify(signed(at.Add(time.Second), deliveryID, body), body, at.Add(time.Second))
	assert.NoError(t, err)
	assert.Equal(t, 1, v.Len())
	v.Forget("never seen")
	assert.Equal(t, 1, v.Len())
}

func TestVerifierConcurrentCopiesPassOnce(t *testing.T) {
	v := NewVerifier(secret, 0, 0)
	h := signed(at, deliveryID, body)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 16 {
		wg.Go(func() {
			if _, err := v.Verify(h.Clone(), body, at); err == nil {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, passed)
}

// Past capacity the store stays at capacity and drops the oldest-stamped
// id; the newest ids are still refused on replay (ErrReplay), and so are
// the dropped ones (ErrUnproven: stamped no later than a dropped id) until
// their timestamps leave the window: no replay passes. The cost: a new
// delivery stamped no later than a dropped id is refused too; the
// exporter's retry has a fresh timestamp and passes.
func TestVerifierStoreIsBounded(t *testing.T) {
	const capacity = 100
	v := NewVerifier(secret, 0, capacity)
	id := func(i int) string { return fmt.Sprintf("fault%04d/open/notify", i) }
	// 1000 deliveries, ten a second: ten times the capacity in the window.
	stamp := func(i int) time.Time { return at.Add(time.Duration(i/10) * time.Second) }
	for i := range 1000 {
		_, err := v.Verify(signed(stamp(i), id(i), body), body, stamp(i))
		require.NoError(t, err, "delivery %d", i)
		require.LessOrEqual(t, v.Len(), capacity)
	}
	assert.Equal(t, capacity, v.Len())
	assert.Len(t, v.byTS, capacity)
	assert.LessOrEqual(t, cap(v.byTS), 2*capacity, "the heap's array is bounded too")
	now := stamp(999)
	for i := range 1000 {
		_, err := v.Verify(signed(stamp(i), id(i), body), body, now)
		if i >= 1000-capacity {
			assert.ErrorIs(t, err, ErrReplay, "replay of newest delivery %d", i)
		} else {
			assert.ErrorIs(t, err, ErrUnproven, "replay of dropped delivery %d", i)
		}
	}
	// The cost: a new delivery stamped before the newest dropped one.
	_, err := v.Verify(signed(stamp(500), "late/open/notify", body), body, now)
	assert.ErrorIs(t, err, ErrUnproven)
	// Its retry, stamped now, passes.
	_, err = v.Verify(signed(now.Add(time.Second), "late/open/notify", body), body, now.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, capacity, v.Len())
	// Once the window has passed every id and the floor are dropped.
	later := now.Add(2 * DefaultMaxSkew)
	_, err = v.Verify(signed(later, id(5), body), body, later)
	require.NoError(t, err)
	assert.Equal(t, 1, v.Len())
	assert.False(t, v.hasFloor)
}

// A burst within one second past capacity: capacity+1 pass (the last by
// dropping one of the same second), the rest of that second are refused
// as unproven, not let through.
func TestVerifierBurstInOneSecond(t *testing.T) {
	v := NewVerifier(secret, 0, 10)
	var passed, unproven int
	for i := range 50 {
		_, err := v.Verify(signed(at, fmt.Sprintf("burst%d", i), body), body, at)
		switch {
		case err == nil:
			passed++
		case assert.ErrorIs(t, err, ErrUnproven):
			unproven++
		}
	}
	assert.Equal(t, 11, passed)
	assert.Equal(t, 39, unproven)
	assert.Equal(t, 10, v.Len())
	for i := range 11 {
		_, err := v.Verify(signed(at, fmt.Sprintf("burst%d", i), body), body, at)
		assert.Error(t, err, "replay of burst%d", i)
	}
}
