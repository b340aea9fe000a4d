package slurm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// Trip (the exporter's quarantine cap refused a fault): stored like
// Admit's own trip, seen by a second breaker on the same state file, the
// first trip's time and detail kept, refused admissions until Reset.
func TestBreakerTripByTheQuarantineCap(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return clock }
	slurm := newMemTransport(10, now)
	stateFile := filepath.Join(t.TempDir(), "breaker.json")
	cfg := BreakerConfig{MaxShare: 0.5, Window: time.Hour}
	b := newBreaker(slurm, DefaultReasonPrefix, cfg, stateFile, zaptest.NewLogger(t))
	b.now = now
	other := newBreaker(slurm, DefaultReasonPrefix, cfg, stateFile, zaptest.NewLogger(t))
	other.now = now

	tripped, err := b.Trip(ctx, clock, "tripped by the quarantine cap: gpu.memory.dbe f1 (P1) on gpu-node5 refused")
	require.NoError(t, err)
	assert.True(t, tripped)
	tripped, err = other.Trip(ctx, clock.Add(time.Minute), "a second reason")
	require.NoError(t, err)
	assert.False(t, tripped, "already tripped")

	st, err := other.State(ctx, clock)
	require.NoError(t, err)
	assert.True(t, st.Tripped)
	assert.Equal(t, clock, st.TrippedAt)
	assert.Equal(t, "tripped by the quarantine cap: gpu.memory.dbe f1 (P1) on gpu-node5 refused", st.Detail)
	raw, err := os.ReadFile(stateFile)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"tripped": true`)
	ok, err := other.Admit(ctx, "gpu-node1", clock)
	require.NoError(t, err)
	assert.False(t, ok, "a breaker tripped by the cap admits nothing")

	require.NoError(t, b.Reset(ctx))
	ok, err = other.Admit(ctx, "gpu-node1", clock.Add(time.Second))
	require.NoError(t, err)
	assert.True(t, ok, "reset: admits again")

	// An unreadable state file fails closed: not tripped, an error.
	require.NoError(t, os.WriteFile(stateFile, []byte("{"), 0o600))
	_, err = b.Trip(ctx, clock, "x")
	assert.Error(t, err)
}
