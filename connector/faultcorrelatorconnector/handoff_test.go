package faultcorrelatorconnector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// gate is a next consumer that takes each batch only when the test says:
// each call shows its batch on entered and returns what release gives it
// (or its context's error).
type gate struct {
	entered chan plog.Logs
	release chan error
}

func newGate() *gate { return &gate{entered: make(chan plog.Logs), release: make(chan error)} }

func (g *gate) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (g *gate) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	select {
	case g.entered <- ld:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-g.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startedCorrelator is a running correlator handing its records to next;
// its clock stands still at t0+5s and the tick is an hour away, so inputs
// alone ask for evaluations.
func startedCorrelator(t *testing.T, next consumer.Logs) *correlator {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.EvaluationInterval = time.Hour
	require.NoError(t, cfg.Validate())
	c, err := newCorrelator(cfg, testSettings(), next)
	require.NoError(t, err)
	clock := &fakeClock{at: t0.Add(5 * time.Second)}
	c.now = clock.now
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	return c
}

// consumeAsync runs ConsumeLogs on its own goroutine; the channel gives its
// result.
func consumeAsync(ctx context.Context, c *correlator, ld plog.Logs) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.ConsumeLogs(ctx, ld) }()
	return done
}

func recordsOf(t *testing.T, ld plog.Logs) []fault.Record {
	t.Helper()
	rs, errs := fault.FromLogs(ld)
	require.Empty(t, errs)
	return rs
}

func returned(done <-chan error) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// An input returns only once the records it caused are accepted; inputs
// that arrive meanwhile are ingested, and evaluated together right after
// the hand-off in progress.
func TestConsumeReturnsOnceItsRecordsAreAccepted(t *testing.T) {
	g := newGate()
	c := startedCorrelator(t, g)
	ctx := context.Background()

	first := consumeAsync(ctx, c, xidOn(testHost, "GPU-a", 48, t0))
	batch := <-g.entered // the evaluation of the first input hands off
	require.Len(t, recordsOf(t, batch), 1)
	assert.False(t, returned(first), "acknowledged before its record was accepted")

	// Two more inputs while the next consumer holds the hand-off.
	second := consumeAsync(ctx, c, xidOn(testHost, "GPU-b", 79, t0))
	third := consumeAsync(ctx, c, xidOn("other", "GPU-c", 13, t0))
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.pending != nil && c.pending.waiters == 2
	}, 10*time.Second, time.Millisecond, "inputs are ingested while a hand-off is held")
	assert.False(t, returned(second))
	assert.False(t, returned(third))

	g.release <- nil
	require.NoError(t, <-first)
	// One evaluation holds both: one batch with both records.
	batch = <-g.entered
	got := opened(recordsOf(t, batch))
	assert.Contains(t, got, "gpu.fell_off_bus gpu:GPU-b")
	assert.Contains(t, got, "gpu.xid.13 gpu:GPU-c")
	assert.False(t, returned(second))
	g.release <- nil
	require.NoError(t, <-second)
	require.NoError(t, <-third)
	require.NoError(t, c.Shutdown(ctx))
}

// An input that keeps no sample can have caused no record: it returns
// without waiting, even while a hand-off is held.
func TestConsumeOfNothingRelevantDoesNotWait(t *testing.T) {
	g := newGate()
	c := startedCorrelator(t, g)
	ctx := context.Background()
	held := consumeAsync(ctx, c, xidOn(testHost, "GPU-a", 48, t0))
	<-g.entered

	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetStr("a training script's progress line")
	require.NoError(t, c.ConsumeLogs(ctx, ld))

	g.release <- nil
	require.NoError(t, <-held)
	require.NoError(t, c.Shutdown(ctx))
}

// An error from the next consumer is the input's error (the Kafka receiver
// does not mark it), and the records are handed off again by the next
// evaluation.
func TestNextConsumerErrorIsReturnedAndRetried(t *testing.T) {
	g := newGate()
	c := startedCorrelator(t, g)
	ctx := context.Background()
	refused := errors.New("queue full")

	first := consumeAsync(ctx, c, xidOn(testHost, "GPU-a", 48, t0))
	require.Len(t, recordsOf(t, <-g.entered), 1)
	g.release <- refused
	assert.ErrorIs(t, <-first, refused)

	// The next input's evaluation sends the refused record first.
	second := consumeAsync(ctx, c, xidOn(testHost, "GPU-b", 79, t0))
	got := opened(recordsOf(t, <-g.entered))
	assert.Contains(t, got, "gpu.memory.dbe gpu:GPU-a")
	assert.Contains(t, got, "gpu.fell_off_bus gpu:GPU-b")
	g.release <- nil
	require.NoError(t, <-second)
	require.NoError(t, c.Shutdown(ctx))
}

// A caller that gives up (its context) gets its context's error; the
// evaluation goes on.
func TestConsumeHonoursItsContext(t *testing.T) {
	g := newGate()
	c := startedCorrelator(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	first := consumeAsync(ctx, c, xidOn(testHost, "GPU-a", 48, t0))
	<-g.entered
	cancel()
	assert.ErrorIs(t, <-first, context.Canceled)
	g.release <- nil
	require.NoError(t, c.Shutdown(context.Background()))
}

// Shutdown ends while an input waits on a held hand-off: the input is not
// acknowledged, and nothing is left running (goleak, TestMain).
func TestShutdownEndsWhileConsumeWaits(t *testing.T) {
	g := newGate()
	c := startedCorrelator(t, g)
	ctx := context.Background()
	first := consumeAsync(ctx, c, xidOn(testHost, "GPU-a", 48, t0))
	<-g.entered
	require.NoError(t, c.Shutdown(ctx))
	assert.Error(t, <-first)

	// After Shutdown an input is refused, not silently dropped.
	assert.ErrorIs(t, c.ConsumeLogs(ctx, xidOn(testHost, "GPU-b", 79, t0)), errShutdown)
}

// An input's evaluation reads only what changed: it opens what the input
// caused and resolves nothing; the full evaluation of the tick resolves.
func TestInputEvaluationResolvesNothing(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(48, t0)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluateWith(ctx, false))
	require.Len(t, faults(t, sink), 1)

	// Past the window and resolve_after: another GPU's XID.
	clock.at = t0.Add(11 * time.Minute)
	require.NoError(t, c.ConsumeLogs(ctx, xidOn(testHost, "GPU-b", 13, clock.at)))
	require.NoError(t, c.evaluateWith(ctx, false))
	got := faults(t, sink)
	require.Len(t, got, 1)
	assert.Equal(t, fault.StateOpen, got[0].State)
	assert.Equal(t, "GPU-b", got[0].Entity.Key)

	require.NoError(t, c.evaluate(ctx))
	got = faults(t, sink)
	require.Len(t, got, 1)
	assert.Equal(t, fault.StateResolved, got[0].State)
	assert.Equal(t, testGPU, got[0].Entity.Key)
}
