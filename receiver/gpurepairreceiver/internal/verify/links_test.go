package verify

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

type linksFixture struct {
	t     *testing.T
	store *nodestate.MemoryStore
	clock *fakeClock
	base  time.Time // the window starts here
	r     *LinksRunner
}

const testWindow = time.Minute

func newLinksFixture(t *testing.T, opts LinksOptions) *linksFixture {
	// The store refuses readings far ahead of the wall clock: time starts now.
	base := time.Now().Truncate(time.Second)
	f := &linksFixture{t: t, store: nodestate.NewMemoryStore(nodestate.DefaultLimits()), clock: newFakeClock(base), base: base}
	if opts.Grace == 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.Poll == 0 {
		opts.Poll = 5 * time.Second
	}
	r, err := NewLinksRunner(f.store, f.clock, opts)
	require.NoError(t, err)
	f.r = r
	return f
}

// nvlink records a GPU's four NVLink counters at base+at.
func (f *linksFixture) nvlink(uuid string, at time.Duration, crcFlit, crcData, replay, recovery uint64) {
	var s nodestate.GPUSample
	for i, v := range []uint64{crcFlit, crcData, replay, recovery} {
		s.Counters[nvlinkCounters[i]] = nodestate.Counter{Value: v, Valid: true}
	}
	f.store.RecordGPU(uuid, f.base.Add(at), s)
}

func (f *linksFixture) ib(device, port string, at time.Duration, symbol uint64) {
	var s nodestate.IBSample
	for c := range nodestate.NumIBCounters {
		s.Counters[c] = nodestate.Counter{Value: 0, Valid: true}
	}
	s.Counters[nodestate.IBSymbolErrors].Value = symbol
	f.store.RecordIB(device, port, f.base.Add(at), s)
}

type linksOutcome struct {
	res []repair.CheckResult
	err error
}

// start runs the check in the background and returns once it waits for
// the window.
func (f *linksFixture) start(ctx context.Context, gpus ...GPU) <-chan linksOutcome {
	out := make(chan linksOutcome, 1)
	go func() {
		res, err := f.r.Run(ctx, Request{Spec: repair.CheckSpec{Check: repair.CheckLinksSteady, Window: testWindow}, GPUs: gpus})
		out <- linksOutcome{res, err}
	}()
	f.clock.waitScheduled()
	return out
}

var linkGPUs = []GPU{{UUID: "GPU-a", Index: 0}, {UUID: "GPU-b", Index: 1}}

func TestLinksSteadyPasses(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	for _, g := range linkGPUs {
		f.nvlink(g.UUID, -10*time.Second, 4, 0, 7, 1)
	}
	f.ib("mlx5_0", "1", -10*time.Second, 3)
	out := f.start(t.Context(), linkGPUs...)
	for _, g := range linkGPUs {
		f.nvlink(g.UUID, 30*time.Second, 4, 0, 7, 1)
		f.nvlink(g.UUID, testWindow, 4, 0, 7, 1)
	}
	f.ib("mlx5_0", "1", testWindow, 3)
	f.clock.Advance(testWindow)
	o := <-out
	require.NoError(t, o.err)
	require.Len(t, o.res, 3)
	for i, g := range linkGPUs {
		assert.Equal(t, g.UUID, o.res[i].GPU)
		assert.Equal(t, string(repair.CheckLinksSteady), o.res[i].Check)
		assert.True(t, o.res[i].Passed, o.res[i].Detail)
		assert.Equal(t, "4 NVLink error counters steady over 1m0s", o.res[i].Detail)
	}
	assert.Empty(t, o.res[2].GPU, "the InfiniBand result is the node's")
	assert.True(t, o.res[2].Passed, o.res[2].Detail)
}

func TestLinksSteadyCounterGrows(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	for _, g := range linkGPUs {
		f.nvlink(g.UUID, -time.Second, 0, 0, 0, 0)
	}
	out := f.start(t.Context(), linkGPUs...)
	f.nvlink("GPU-a", testWindow, 0, 0, 0, 0)
	f.nvlink("GPU-b", testWindow/2, 0, 0, 2, 0)
	f.nvlink("GPU-b", testWindow, 0, 3, 2, 0)
	f.clock.Advance(testWindow)
	o := <-out
	require.NoError(t, o.err)
	assert.True(t, o.res[0].Passed, o.res[0].Detail)
	assert.False(t, o.res[1].Passed)
	assert.Equal(t, "NVLink nvlink.crc_data grew by 3; nvlink.replay grew by 2", o.res[1].Detail)
	assert.True(t, o.res[2].Passed, "no InfiniBand here, not required")
}

func TestLinksSteadyCounterReset(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	f.nvlink("GPU-a", -time.Second, 5, 0, 0, 0)
	out := f.start(t.Context(), linkGPUs[0])
	f.nvlink("GPU-a", testWindow, 0, 0, 0, 0)
	f.clock.Advance(testWindow)
	o := <-out
	require.NoError(t, o.err)
	assert.False(t, o.res[0].Passed)
	assert.Contains(t, o.res[0].Detail, "nvlink.crc_flit was reset 1 times")
}

func TestLinksSteadyNoReading(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	f.nvlink("GPU-a", -time.Second, 0, 0, 0, 0)
	out := f.start(t.Context(), linkGPUs...)
	f.nvlink("GPU-a", testWindow, 0, 0, 0, 0)
	// GPU-b's first reading comes inside the window: it says nothing of
	// the counters at the start.
	f.nvlink("GPU-b", time.Second, 0, 0, 0, 0)
	f.nvlink("GPU-b", testWindow, 0, 0, 0, 0)
	f.clock.Advance(testWindow)
	o := <-out
	require.NoError(t, o.err)
	assert.True(t, o.res[0].Passed)
	assert.False(t, o.res[1].Passed)
	assert.Contains(t, o.res[1].Detail, "nvlink.crc_flit: no reading at or before the window's start")

	// A GPU the store never heard of.
	f = newLinksFixture(t, LinksOptions{})
	out = f.start(t.Context(), GPU{UUID: "GPU-unknown", Index: 3})
	f.clock.Advance(testWindow)
	o = <-out
	require.NoError(t, o.err)
	assert.False(t, o.res[0].Passed)
	assert.Equal(t, "no NVLink error counter reading for GPU 3: no reading is not steady", o.res[0].Detail)
}

// The reading that closes the window comes a scrape later: the check waits
// for it within the grace.
func TestLinksSteadyWaitsForTheClosingReading(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	f.nvlink("GPU-a", -time.Second, 1, 1, 1, 1)
	out := f.start(t.Context(), linkGPUs[0])
	f.nvlink("GPU-a", testWindow-2*time.Second, 1, 1, 1, 1)
	f.clock.Advance(testWindow)
	f.clock.waitScheduled() // it polls
	f.nvlink("GPU-a", testWindow+3*time.Second, 1, 1, 1, 1)
	f.clock.Advance(5 * time.Second)
	o := <-out
	require.NoError(t, o.err)
	assert.True(t, o.res[0].Passed, o.res[0].Detail)
}

// Readings that stop before the window ends fail it once the grace is over.
func TestLinksSteadyReadingsStop(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	f.nvlink("GPU-a", -time.Second, 0, 0, 0, 0)
	f.ib("mlx5_0", "1", -time.Second, 0)
	out := f.start(t.Context(), linkGPUs[0])
	f.nvlink("GPU-a", 20*time.Second, 0, 0, 0, 0)
	f.ib("mlx5_0", "1", 20*time.Second, 0)
	f.clock.Advance(testWindow)
	for range 2 { // grace 10s, poll 5s
		f.clock.waitScheduled()
		f.clock.Advance(5 * time.Second)
	}
	o := <-out
	require.NoError(t, o.err)
	assert.False(t, o.res[0].Passed)
	assert.Contains(t, o.res[0].Detail, "nvlink.crc_flit: no reading at or after the window's end")
	assert.False(t, o.res[1].Passed)
	assert.Contains(t, o.res[1].Detail, "mlx5_0/1 symbol_error: no reading at or after the window's end")
}

func TestLinksSteadyIB(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	f.nvlink("GPU-a", -time.Second, 0, 0, 0, 0)
	f.ib("mlx5_0", "1", -time.Second, 10)
	f.ib("mlx5_1", "1", -time.Second, 10)
	out := f.start(t.Context(), linkGPUs[0])
	f.nvlink("GPU-a", testWindow, 0, 0, 0, 0)
	f.ib("mlx5_0", "1", testWindow, 10)
	f.ib("mlx5_1", "1", testWindow, 17)
	f.clock.Advance(testWindow)
	o := <-out
	require.NoError(t, o.err)
	assert.True(t, o.res[0].Passed)
	assert.False(t, o.res[1].Passed)
	assert.Equal(t, "InfiniBand mlx5_1/1 symbol_error grew by 7", o.res[1].Detail)

	f = newLinksFixture(t, LinksOptions{RequireIB: true})
	f.nvlink("GPU-a", -time.Second, 0, 0, 0, 0)
	out = f.start(t.Context(), linkGPUs[0])
	f.nvlink("GPU-a", testWindow, 0, 0, 0, 0)
	f.clock.Advance(testWindow)
	o = <-out
	require.NoError(t, o.err)
	assert.True(t, o.res[0].Passed)
	assert.False(t, o.res[1].Passed)
	assert.Contains(t, o.res[1].Detail, "no InfiniBand port reading")
}

func TestLinksSteadyCancel(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	out := f.start(ctx, linkGPUs...)
	cancel()
	o := <-out
	assert.ErrorIs(t, o.err, context.Canceled)
	assert.Nil(t, o.res)
}

func TestLinksSteadyRefuses(t *testing.T) {
	f := newLinksFixture(t, LinksOptions{})
	for _, c := range []struct {
		name string
		spec repair.CheckSpec
		want string
	}{
		{"no window", repair.CheckSpec{Check: repair.CheckLinksSteady}, "window 0s"},
		{"negative window", repair.CheckSpec{Check: repair.CheckLinksSteady, Window: -time.Second}, "window -1s"},
		{"huge window", repair.CheckSpec{Check: repair.CheckLinksSteady, Window: 7 * time.Hour}, "window 7h0m0s"},
		{"other check", repair.CheckSpec{Check: repair.CheckDiag, Level: 1, Window: time.Minute}, "dcgm_diag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.r.Run(t.Context(), Request{Spec: c.spec, GPUs: linkGPUs})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := NewLinksRunner(nil, nil, LinksOptions{})
	assert.Error(t, err)
	_, err = NewLinksRunner(f.store, nil, LinksOptions{Poll: -1})
	assert.Error(t, err)
	r, err := NewLinksRunner(f.store, nil, LinksOptions{})
	require.NoError(t, err)
	assert.Equal(t, RealClock{}, r.clock)
	assert.Equal(t, DefaultLinksGrace, r.opts.Grace)
}
