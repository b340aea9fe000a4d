package dcgmsrc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// xidSource is a started source whose XIDs the test polls by hand.
func xidSource(t *testing.T, h *harness) *Source {
	t.Helper()
	s := h.source(Config{XIDPollInterval: time.Hour}) // the loop never ticks
	require.NoError(t, s.Start(context.Background(), func(model.XIDEvent) {}))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	return s
}

type occurrence struct {
	gpu  int
	code int
	at   time.Time
}

func occurrences(events []model.XIDEvent) []occurrence {
	out := make([]occurrence, len(events))
	for i, e := range events {
		out[i] = occurrence{gpu: e.GPU.Index, code: e.Code, at: e.Time}
	}
	return out
}

func TestEveryXIDOccurrenceOnce(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelH100), newFakeGPU(t, 1, modelH100))
	s := xidSource(t, h)
	ctx := context.Background()
	t0 := h.clock.Now()

	// Before Start: an earlier run's, not reported.
	h.fake.addXID(0, 13, t0.Add(-time.Minute))
	// The same code twice on one GPU is two occurrences (DCGM_FI_DEV_XID_ERRORS
	// as a gauge would show only the last).
	h.fake.addXID(1, 79, t0.Add(3*time.Second))
	h.fake.addXID(0, 119, t0.Add(time.Second))
	h.fake.addXID(0, 119, t0.Add(2*time.Second))
	h.clock.Advance(5 * time.Second)

	events := s.pollXIDs(ctx)
	assert.Equal(t, []occurrence{
		{0, 119, time.UnixMicro(t0.Add(time.Second).UnixMicro())},
		{0, 119, time.UnixMicro(t0.Add(2 * time.Second).UnixMicro())},
		{1, 79, time.UnixMicro(t0.Add(3 * time.Second).UnixMicro())},
	}, occurrences(events))
	for _, e := range events {
		assert.Equal(t, "dcgm", e.Source)
		assert.Equal(t, "NVIDIA H100 80GB HBM3", e.GPU.Model)
		assert.NotEmpty(t, e.GPU.UUID)
	}

	// DCGM returns the newest sample again: it is not reported twice.
	assert.Empty(t, s.pollXIDs(ctx))
	h.fake.addXID(1, 48, t0.Add(6*time.Second))
	assert.Equal(t, []occurrence{{1, 48, time.UnixMicro(t0.Add(6 * time.Second).UnixMicro())}}, occurrences(s.pollXIDs(ctx)))

	// The XID field is watched keeping every sample, not just the last.
	h.fake.mu.Lock()
	w, ok := h.fake.watchedOn(1, model.FieldXIDErrors)
	h.fake.mu.Unlock()
	require.True(t, ok)
	assert.Equal(t, 0, w.keepSamples)
	assert.Equal(t, xidKeepAge, w.keepAge)
}

func TestXIDsSkipNonValues(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	s := xidSource(t, h)
	at := h.clock.Now().Add(time.Second).UnixMicro()
	h.fake.set(func(f *fakeDCGM) {
		f.xids = append(f.xids,
			fieldValue{GPU: 0, Field: model.FieldXIDErrors, Type: fieldTypeInt64, Int: model.Int64Blank, TS: at},
			fieldValue{GPU: 0, Field: model.FieldXIDErrors, Type: fieldTypeInt64, Int: 0, TS: at + 1},
			fieldValue{GPU: 0, Field: model.FieldXIDErrors, Type: fieldTypeInt64, Int: 31, TS: at + 2, Status: stNotSupported},
			fieldValue{GPU: 0, Field: model.FieldXIDErrors, Type: fieldTypeDouble, Float: 31, TS: at + 3},
			fieldValue{GPU: 0, Field: model.FieldXIDErrors, Type: fieldTypeInt64, Int: 31, TS: at + 4},
		)
	})
	events := s.pollXIDs(context.Background())
	require.Len(t, events, 1)
	assert.Equal(t, 31, events[0].Code)
}

func TestXIDsAcrossConnectionLoss(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4), newFakeGPU(t, 1, modelL4))
	s := xidSource(t, h)
	ctx := context.Background()
	t0 := h.clock.Now()

	h.fake.addXID(0, 13, t0.Add(time.Second)) // A
	h.clock.Advance(2 * time.Second)
	require.Len(t, s.pollXIDs(ctx), 1)

	// B happens, then the connection breaks before the next poll.
	h.fake.addXID(1, 74, t0.Add(3*time.Second)) // B
	h.fake.killEngine()
	h.clock.Advance(time.Second)
	assert.Empty(t, s.pollXIDs(ctx))
	assert.Empty(t, s.pollXIDs(ctx))

	// The engine comes back with its samples (a connection blip); C
	// happened while this side was disconnected.
	h.fake.startEngine(true)
	h.fake.addXID(0, 48, t0.Add(5*time.Second)) // C
	h.clock.Advance(5 * time.Second)
	assert.Equal(t, []occurrence{
		{1, 74, time.UnixMicro(t0.Add(3 * time.Second).UnixMicro())},
		{0, 48, time.UnixMicro(t0.Add(5 * time.Second).UnixMicro())},
	}, occurrences(s.pollXIDs(ctx)), "neither A again nor B or C lost")
	assert.Equal(t, 2, h.fake.instance)
	h.fake.mu.Lock()
	_, watched := h.fake.watchedOn(0, model.FieldXIDErrors)
	h.fake.mu.Unlock()
	assert.True(t, watched, "the XID watch is made again on the new connection")
	assert.Empty(t, s.pollXIDs(ctx))
}

func TestXIDsAfterHostengineRestart(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	s := xidSource(t, h)
	ctx := context.Background()
	t0 := h.clock.Now()
	h.fake.addXID(0, 31, t0.Add(time.Second))
	h.clock.Advance(2 * time.Second)
	require.Len(t, s.pollXIDs(ctx), 1)

	h.fake.killEngine()
	assert.Empty(t, s.pollXIDs(ctx))
	h.fake.startEngine(false) // a new engine: its store starts empty
	h.clock.Advance(2 * time.Second)
	h.fake.addXID(0, 31, t0.Add(3*time.Second))
	assert.Equal(t, []occurrence{{0, 31, time.UnixMicro(t0.Add(3 * time.Second).UnixMicro())}}, occurrences(s.pollXIDs(ctx)))
}

func TestXIDDedupeSetStaysSmall(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	s := xidSource(t, h)
	ctx := context.Background()
	for i := range 200 {
		h.clock.Advance(time.Second)
		h.fake.addXID(0, 13, h.clock.Now())
		require.Len(t, s.pollXIDs(ctx), 1, "poll %d", i)
	}
	s.xidMu.Lock()
	defer s.xidMu.Unlock()
	assert.LessOrEqual(t, len(s.xid.seen), 61, "only the last minute is remembered")
}

func TestXIDLoopDelivers(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	var mu sync.Mutex
	var got []model.XIDEvent
	s := h.source(Config{XIDPollInterval: 5 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, s.Start(ctx, func(e model.XIDEvent) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	}))
	require.NoError(t, s.Start(ctx, nil), "Start again is harmless")
	h.fake.addXID(0, 79, h.clock.Now().Add(time.Millisecond))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, s.Shutdown(ctx))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 79, got[0].Code)
	assert.Equal(t, "dcgm", got[0].Source)
}
