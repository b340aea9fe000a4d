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
