package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// memTransport is an in-memory Slurm for the breaker's logic.
type memTransport struct {
	mu     sync.Mutex
	byName map[string]nodeInfo
	now    func() time.Time
}

func newMemTransport(n int, now func() time.Time) *memTransport {
	m := &memTransport{byName: make(map[string]nodeInfo), now: now}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("gpu-node%d", i)
		m.byName[name] = nodeInfo{Name: name, States: []string{"IDLE"}}
	}
	return m
}

func (m *memTransport) node(_ context.Context, name string) (nodeInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.byName[name]
	if !ok {
		return nodeInfo{}, errNodeNotFound
	}
	return n, nil
}

func (m *memTransport) nodes(context.Context) ([]nodeInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []nodeInfo
	for _, n := range m.byName {
		out = append(out, n)
	}
	return out, nil
}

func (*memTransport) reservations(context.Context) ([]reservation, error) { return nil, nil }

func (m *memTransport) drain(_ context.Context, name, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byName[name] = nodeInfo{Name: name, States: []string{"IDLE", "DRAIN"}, Reason: reason, ReasonTime: m.now().Truncate(time.Second)}
	return nil
}

func (m *memTransport) resume(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byName[name] = nodeInfo{Name: name, States: []string{"IDLE"}}
	return nil
}

func TestBreakerRecountsFromSlurmAndPersistsTrip(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return clock }
	slurm := newMemTransport(10, now)
	stateFile := filepath.Join(t.TempDir(), "breaker.json")
	cfg := BreakerConfig{MaxShare: 0.2, Window: time.Hour}
	b := newBreaker(slurm, DefaultReasonPrefix, cfg, stateFile, zaptest.NewLogger(t))
	b.now = now

	// Someone else's drains do not count; two of ours within the window do.
	require.NoError(t, slurm.drain(ctx, "gpu-node9", "bad fan"))
	require.NoError(t, slurm.drain(ctx, "gpu-node1", "otelcol-gpu: gpu.ecc.dbe 1"))
	ok, err := b.Admit(ctx, "gpu-node1", clock)
	require.NoError(t, err)
	assert.True(t, ok, "a node already counted is admitted again")

	// A fresh breaker (a restart, a second replica) sees the same count.
	b2 := newBreaker(slurm, DefaultReasonPrefix, cfg, stateFile, zaptest.NewLogger(t))
	b2.now = now
	ok, err = b2.Admit(ctx, "gpu-node2", clock)
	require.NoError(t, err)
	assert.True(t, ok)
	// node2 is admitted but not yet drained: still counted.
	ok, err = b2.Admit(ctx, "gpu-node3", clock)
	require.NoError(t, err)
	assert.False(t, ok, "third node of ten at max_share 0.2")

	// The trip is in the state file: the first breaker sees it too.
	tripped, err := b.Tripped(ctx)
	require.NoError(t, err)
	assert.True(t, tripped)
	raw, err := os.ReadFile(stateFile)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"tripped": true`)

	// Stays tripped even when the window has passed, until Reset.
	clock = clock.Add(2 * time.Hour)
	ok, err = b.Admit(ctx, "gpu-node4", clock)
	require.NoError(t, err)
	assert.False(t, ok)

	require.NoError(t, b.Reset(ctx))
	tripped, err = b2.Tripped(ctx)
	require.NoError(t, err)
	assert.False(t, tripped)
	ok, err = b.Admit(ctx, "gpu-node4", clock)
	require.NoError(t, err)
	assert.True(t, ok)

	// A corrupt state file fails closed.
	require.NoError(t, os.WriteFile(stateFile, []byte("{"), 0o600))
	ok, err = b.Admit(ctx, "gpu-node5", clock)
	assert.Error(t, err)
	assert.False(t, ok)
}

func TestBreakerResetStartsNewWindow(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return clock }
	slurm := newMemTransport(5, now)
	b := newBreaker(slurm, DefaultReasonPrefix, BreakerConfig{MaxShare: 0.2, Window: time.Hour}, "", zaptest.NewLogger(t))
	b.now = now
	require.NoError(t, slurm.drain(ctx, "gpu-node1", "otelcol-gpu: t 1"))
	ok, err := b.Admit(ctx, "gpu-node2", clock)
	require.NoError(t, err)
	require.False(t, ok, "limit is one node of five")

	clock = clock.Add(10 * time.Second)
	require.NoError(t, b.Reset(ctx))
	clock = clock.Add(time.Second)
	ok, err = b.Admit(ctx, "gpu-node2", clock)
	require.NoError(t, err)
	assert.True(t, ok, "drains before the reset no longer count")
}

func TestBreakerStateReadsWithoutChanging(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return clock }
	slurm := newMemTransport(10, now)
	stateFile := filepath.Join(t.TempDir(), "breaker.json")
	b := newBreaker(slurm, DefaultReasonPrefix, BreakerConfig{MaxShare: 0.2, Window: time.Hour}, stateFile, zaptest.NewLogger(t))
	b.now = now

	st, err := b.State(ctx, clock)
	require.NoError(t, err)
	assert.Equal(t, actuator.BreakerState{Budget: 2, Window: time.Hour}, st)

	require.NoError(t, slurm.drain(ctx, "gpu-node9", "bad fan")) // not ours
	require.NoError(t, slurm.drain(ctx, "gpu-node1", "otelcol-gpu: gpu.ecc.dbe 1"))
	ok, err := b.Admit(ctx, "gpu-node2", clock) // admitted, not yet drained
	require.NoError(t, err)
	require.True(t, ok)
	st, err = b.State(ctx, clock)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Used)
	assert.False(t, st.Tripped)
	_, err = os.Stat(stateFile)
	assert.ErrorIs(t, err, os.ErrNotExist, "reading stores nothing")

	ok, err = b.Admit(ctx, "gpu-node3", clock)
	require.NoError(t, err)
	require.False(t, ok)
	st, err = b.State(ctx, clock)
	require.NoError(t, err)
	assert.True(t, st.Tripped)
	assert.Equal(t, clock, st.TrippedAt)
	assert.Contains(t, st.Detail, "refused gpu-node3")

	// Past the window the admission is no longer counted, and State keeps
	// it (Admit prunes).
	st, err = b.State(ctx, clock.Add(2*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 0, st.Used)
	assert.Len(t, b.pending, 1)
	require.NoError(t, b.Reset(ctx))
	st, err = b.State(ctx, clock)
	require.NoError(t, err)
	assert.False(t, st.Tripped)
}
