package dcgmsrc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestLibraryMissingStopsAtInit(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	h.fake.set(func(f *fakeDCGM) { f.libMissing = true })
	s := h.source(Config{})
	ctx := context.Background()

	err := s.Start(ctx, func(model.XIDEvent) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "libdcgm.so.4 not found")
	assert.Contains(t, err.Error(), "dcgmreceiver: dcgm:")
	assert.Contains(t, err.Error(), "NVIDIA's DCGM image", "the one warning says how to provide the library")
	assert.Contains(t, err.Error(), "GPU_SOURCE=nvml")

	// Retrying at once is cheap: the back-off answers without calling Init.
	require.Error(t, s.Start(ctx, nil))
	_, err = s.Collect(ctx, []model.FieldID{model.FieldGPUTemp})
	require.Error(t, err)
	assert.Equal(t, 1, h.fake.callCount("Init"))

	// After the back-off, Init is tried again, and still nothing else.
	h.clock.Advance(initialConnectBackoff)
	require.Error(t, s.Start(ctx, nil))
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, []string{"Init", "Init"}, h.fake.calls, "no call but Init may reach go-dcgm without a successful Init")
	assert.Zero(t, h.logs.Len(), "a failing Init is the receiver's to log, once")
}

func TestConnectBacksOffExponentially(t *testing.T) {
	h := newHarness(t)
	h.fake.set(func(f *fakeDCGM) { f.engineDown = true })
	s := h.source(Config{})
	ctx := context.Background()
	var waits []time.Duration
	for range 9 {
		before := h.fake.callCount("Init")
		require.Error(t, s.Start(ctx, nil))
		require.Equal(t, before+1, h.fake.callCount("Init"))
		conn := s.conn.Load()
		conn.mu.Lock()
		wait := conn.retryAt.Sub(h.clock.Now())
		conn.mu.Unlock()
		waits = append(waits, wait)
		h.clock.Advance(wait)
	}
	assert.Equal(t, []time.Duration{
		time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute, time.Minute,
	}, waits)
	require.NoError(t, s.Shutdown(ctx))
}

func TestSourcesShareOneConnection(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	ctx := context.Background()
	a := h.source(Config{Endpoint: "localhost:5555"})
	b := h.source(Config{}) // the default endpoint is the same one
	require.NoError(t, a.Start(ctx, nil))
	require.NoError(t, b.Start(ctx, nil))
	assert.Equal(t, 1, h.fake.callCount("Init"))
	assert.Same(t, a.conn.Load(), b.conn.Load())

	// A second, different connection cannot exist in the process.
	c := h.source(Config{Mode: ModeEmbedded})
	err := c.Start(ctx, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "one connection per process")
	require.NoError(t, c.Shutdown(ctx))

	require.NoError(t, a.Shutdown(ctx))
	_, err = b.Collect(ctx, []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err, "the other source keeps the connection")
	assert.Zero(t, h.fake.cleanups)
	require.NoError(t, b.Shutdown(ctx))
	assert.Equal(t, 1, h.fake.cleanups, "the last release disconnects")

	// The slot is free again: another mode may connect now.
	d := h.source(Config{Mode: ModeEmbedded})
	require.NoError(t, d.Start(ctx, nil))
	require.NoError(t, d.Shutdown(ctx))
	assert.Equal(t, 2, h.fake.cleanups)
}

func TestAcquireRejectsUnknownMode(t *testing.T) {
	h := newHarness(t)
	_, err := h.conns.Acquire("sideways", "", zap.NewNop())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown mode "sideways"`)
	assert.Empty(t, h.fake.calls)
}

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, address string
		socket      bool
	}{
		{"localhost:5555", "localhost:5555", false},
		{"10.0.0.7", "10.0.0.7", false},
		{"/run/nvidia/nv-hostengine.sock", "/run/nvidia/nv-hostengine.sock", true},
		{"unix:///tmp/dcgm.sock", "/tmp/dcgm.sock", true},
	} {
		address, socket := parseEndpoint(tc.in)
		assert.Equal(t, tc.address, address, tc.in)
		assert.Equal(t, tc.socket, socket, tc.in)
	}
}

func TestConnectionLogsStateChangesOnce(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	ctx := context.Background()
	s := h.source(Config{})
	require.NoError(t, s.Start(ctx, nil))
	fields := []model.FieldID{model.FieldGPUTemp}
	_, err := s.Collect(ctx, fields)
	require.NoError(t, err)

	h.fake.killEngine()
	for range 5 {
		_, err := s.Collect(ctx, fields)
		require.Error(t, err)
		h.clock.Advance(time.Minute)
	}
	h.fake.startEngine(true)
	h.clock.Advance(time.Minute)
	for range 3 {
		_, err := s.Collect(ctx, fields)
		require.NoError(t, err)
	}
	require.NoError(t, s.Shutdown(ctx))

	assert.Equal(t, 1, h.count("Connected to DCGM"))
	assert.Equal(t, 1, h.count("Lost the connection to DCGM"))
	assert.Equal(t, 1, h.count("Reconnected to DCGM"))
	assert.Equal(t, 3, h.logs.Len(), "one line per state change: %v", h.logs.All())
}

func TestDoRefusesWhileDisconnected(t *testing.T) {
	h := newHarness(t)
	conn, err := h.conns.Acquire(ModeStandalone, "", zap.NewNop())
	require.NoError(t, err)
	called := false
	err = conn.do(0, func(api) error { called = true; return nil })
	require.ErrorIs(t, err, errNotConnected)
	assert.False(t, called)

	gen, err := conn.connect(context.Background())
	require.NoError(t, err)
	require.ErrorIs(t, conn.do(gen+1, func(api) error { called = true; return nil }), errNotConnected, "an older generation's objects are gone")
	assert.False(t, called)
	require.NoError(t, conn.do(gen, func(api) error { called = true; return nil }))
	assert.True(t, called)
	conn.Release()
	conn.Release() // extra releases are harmless
	assert.Equal(t, 1, h.fake.cleanups)
}

func TestReleaseDoesNotWaitForStuckCall(t *testing.T) {
	h := newHarness(t)
	conn, err := h.conns.Acquire(ModeStandalone, "", zap.NewNop())
	require.NoError(t, err)
	gen, err := conn.connect(context.Background())
	require.NoError(t, err)

	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- conn.do(gen, func(api) error { close(inside); <-release; return errors.New("late") })
	}()
	<-inside
	conn.Release() // returns at once although a call is inside go-dcgm
	assert.Zero(t, h.fake.cleanups, "unloading go-dcgm under a running call would crash")

	// The slot stays taken until the call returns; the same connection may
	// be taken again meanwhile.
	_, err = h.conns.Acquire(ModeEmbedded, "", zap.NewNop())
	require.Error(t, err)

	close(release)
	require.Error(t, <-done)
	assert.Equal(t, 1, h.fake.cleanups, "the last call out disconnects")
	c2, err := h.conns.Acquire(ModeEmbedded, "", zap.NewNop())
	require.NoError(t, err)
	c2.Release()
}

func TestReconnectWaitsForCallsOfTheLostConnection(t *testing.T) {
	h := newHarness(t)
	conn, err := h.conns.Acquire(ModeStandalone, "", zap.NewNop())
	require.NoError(t, err)
	defer conn.Release()
	gen, err := conn.connect(context.Background())
	require.NoError(t, err)

	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- conn.do(gen, func(api) error { close(inside); <-release; return nil })
	}()
	<-inside
	require.Error(t, conn.do(gen, func(api) error { return errors.New(msgConnection) }))
	_, err = conn.connect(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "waiting for 1 calls")
	assert.Equal(t, 1, h.fake.callCount("Init"))

	close(release)
	require.NoError(t, <-done)
	gen2, err := conn.connect(context.Background())
	require.NoError(t, err)
	assert.Equal(t, gen+1, gen2)
	assert.Equal(t, 1, h.fake.cleanups, "the lost connection is shut down before Init")
}

func TestShutdownDuringSlowInit(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	gate := make(chan struct{})
	h.fake.set(func(f *fakeDCGM) { f.initGate = gate })
	s := h.source(Config{})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.Start(ctx, func(model.XIDEvent) {})
	require.ErrorIs(t, err, context.DeadlineExceeded, "Start honours its context")
	require.Error(t, s.Start(context.Background(), nil), "an attempt is already running")

	begin := time.Now()
	require.NoError(t, s.Shutdown(context.Background()))
	assert.Less(t, time.Since(begin), time.Second, "Shutdown does not wait for Init")

	// Init finally succeeds after the release: it is undone at once.
	close(gate)
	conn := s.conn.Load()
	require.Eventually(t, func() bool {
		h.fake.mu.Lock()
		defer h.fake.mu.Unlock()
		return h.fake.cleanups == 1
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, conn.guard.Wait(context.Background()))
	require.Eventually(t, func() bool {
		h.conns.mu.Lock()
		defer h.conns.mu.Unlock()
		return h.conns.active == nil
	}, 5*time.Second, time.Millisecond, "the registry slot is free")
	assert.Equal(t, []string{"Init"}, h.fake.calls)
}
