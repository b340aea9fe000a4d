package periodic

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With nothing due the loop never ticks: an idle component costs no wakeup.
func TestDueLoopIdleNeverTicks(t *testing.T) {
	var l DueLoop
	var ticks atomic.Int64
	l.Start(time.Millisecond, func(context.Context) time.Time { ticks.Add(1); return time.Time{} })
	time.Sleep(30 * time.Millisecond)
	l.Stop()
	assert.Zero(t, ticks.Load())
}

// A tick comes at the time asked for, never before it; what the tick says
// it still holds is ticked again when due; an earlier Due overtakes a later.
func TestDueLoopTicksWhenDue(t *testing.T) {
	var l DueLoop
	var mu sync.Mutex
	var at []time.Time
	done := make(chan struct{})
	start := time.Now()
	l.Start(time.Millisecond, func(context.Context) time.Time {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		switch len(at) {
		case 1:
			return start.Add(40 * time.Millisecond) // still holds work due then
		case 2:
			close(done)
		}
		return time.Time{}
	})
	l.Due(start.Add(time.Hour))
	l.Due(start.Add(20 * time.Millisecond)) // earlier: overtakes the hour
	<-done
	l.Stop()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, at, 2)
	assert.False(t, at[0].Before(start.Add(20*time.Millisecond)), "first tick %v after start, want >= 20ms", at[0].Sub(start))
	assert.False(t, at[1].Before(start.Add(40*time.Millisecond)), "second tick %v after start, want >= 40ms", at[1].Sub(start))
}

// Work that is due at once, arriving all the time, is ticked at most once
// per minGap.
func TestDueLoopMinGap(t *testing.T) {
	var l DueLoop
	var mu sync.Mutex
	var at []time.Time
	l.Start(10*time.Millisecond, func(context.Context) time.Time {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return time.Time{}
	})
	for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
		l.Due(time.Now())
		time.Sleep(100 * time.Microsecond)
	}
	l.Stop()
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(at), 2)
	for i := 1; i < len(at); i++ {
		assert.GreaterOrEqual(t, at[i].Sub(at[i-1]), 10*time.Millisecond, "ticks %d and %d", i-1, i)
	}
}

// Due before Start, and after Stop, neither blocks nor panics; the time
// asked for before Start is honoured.
func TestDueLoopDueBeforeStart(t *testing.T) {
	var l DueLoop
	l.Due(time.Now())
	ticked := make(chan struct{})
	var once sync.Once
	l.Start(time.Millisecond, func(context.Context) time.Time { once.Do(func() { close(ticked) }); return time.Time{} })
	<-ticked
	l.Stop()
	l.Due(time.Now())
	l.Due(time.Now())
}
