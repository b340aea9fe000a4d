package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLoopTicksUntilStop(t *testing.T) {
	var l Loop
	var ticks atomic.Int64
	reached := make(chan struct{})
	l.Start(time.Millisecond, func(context.Context) {
		if ticks.Add(1) == 3 {
			close(reached)
		}
	})
	<-reached
	l.Stop()
	after := ticks.Load()
	assert.GreaterOrEqual(t, after, int64(3))
	time.Sleep(5 * time.Millisecond)
	assert.Equal(t, after, ticks.Load(), "no tick may run after Stop returned")
}

// Stop cancels the context of a tick in progress and waits for it: a tick
// blocked downstream ends with the component instead of outliving it.
func TestStopCancelsAndWaitsForTheRunningTick(t *testing.T) {
	var l Loop
	running := make(chan struct{})
	var returned atomic.Bool
	var once atomic.Bool
	l.Start(time.Millisecond, func(ctx context.Context) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		close(running)
		<-ctx.Done()
		returned.Store(true)
	})
	<-running
	l.Stop()
	require.True(t, returned.Load(), "Stop returned before the tick did")
}

func TestStopWithoutStart(t *testing.T) {
	var l Loop
	l.Stop()
}

// The final flush runs after the last tick, under a context with a
// deadline: a flush blocked downstream (a backend that is down) ends when
// the deadline passes instead of holding the component's Shutdown.
func TestStopAndFlushBoundsAFlushBlockedDownstream(t *testing.T) {
	l := Loop{FinalFlushTimeout: 10 * time.Millisecond}
	var ticking atomic.Bool
	l.Start(time.Millisecond, func(context.Context) {
		ticking.Store(true)
		time.Sleep(time.Millisecond)
		ticking.Store(false)
	})
	var flushErr error
	var deadline time.Time
	var hasDeadline, tickRunning bool
	before := time.Now()
	l.StopAndFlush(context.Background(), func(ctx context.Context) {
		tickRunning = ticking.Load()
		deadline, hasDeadline = ctx.Deadline()
		<-ctx.Done() // nothing downstream accepts the flush
		flushErr = ctx.Err()
	})
	require.True(t, hasDeadline, "the final flush's context has no deadline")
	assert.False(t, deadline.Before(before.Add(10*time.Millisecond)), "deadline %v before the loop's bound", deadline)
	assert.ErrorIs(t, flushErr, context.DeadlineExceeded)
	assert.False(t, tickRunning, "the final flush ran while a tick was running")
}

// Without a bound of its own the loop uses FinalFlushTimeout, and an earlier
// deadline of the caller's context is kept.
func TestStopAndFlushDeadlines(t *testing.T) {
	var l Loop
	before := time.Now()
	var deadline time.Time
	l.StopAndFlush(context.Background(), func(ctx context.Context) { deadline, _ = ctx.Deadline() })
	assert.False(t, deadline.Before(before.Add(FinalFlushTimeout)))
	assert.False(t, deadline.After(time.Now().Add(FinalFlushTimeout)))

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	l.StopAndFlush(ctx, func(ctx context.Context) { deadline, _ = ctx.Deadline() })
	assert.Equal(t, want, deadline)
}
