package periodic // import "github.com/otelcol-gpu/otelcol-gpu/internal/periodic"

import (
	"context"
	"sync"
	"time"
)

// DueLoop calls a function when work it holds is due, not on a fixed
// ticker: an idle component costs no wakeup. A 100 ms ticker that found
// nothing to do woke the agent's whole runtime ten times a second (issue
// 32; each wakeup also restarts the Go scheduler's monitor thread), for
// steps that fall due once per collective_wait. The zero value is ready to
// Start; Stop and StopAndFlush are Loop's.
type DueLoop struct {
	Loop

	mu      sync.Mutex
	due     time.Time // the earliest time asked for; zero: none
	wakeMu  sync.Once
	wakeSig chan struct{}
}

func (l *DueLoop) wake() chan struct{} {
	l.wakeMu.Do(func() { l.wakeSig = make(chan struct{}, 1) })
	return l.wakeSig
}

// Due asks for a tick at t, or keeps an earlier one already asked for.
// It never blocks; call it whenever work that falls due at t is taken in.
func (l *DueLoop) Due(t time.Time) {
	l.mu.Lock()
	earlier := l.due.IsZero() || t.Before(l.due)
	if earlier {
		l.due = t
	}
	l.mu.Unlock()
	if earlier {
		select {
		case l.wake() <- struct{}{}:
		default: // a wakeup is pending: the loop reads the new time
		}
	}
}

// Start calls tick when a time asked for with Due has come, at most once
// per minGap (the granularity that bounds the cost of a burst of
// arrivals), counted from the end of the previous tick. tick returns when the work it still holds is next due (zero:
// none held); new work asks through Due.
func (l *DueLoop) Start(minGap time.Duration, tick func(context.Context) time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	wake := l.wake()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		var last time.Time
		for {
			l.mu.Lock()
			due := l.due
			l.mu.Unlock()
			var fire <-chan time.Time
			if !due.IsZero() {
				if earliest := last.Add(minGap); due.Before(earliest) {
					due = earliest
				}
				timer.Reset(time.Until(due))
				fire = timer.C
			}
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-wake:
				timer.Stop()
				continue // a new due time: wait for whichever comes first
			case <-fire:
			}
			l.mu.Lock()
			l.due = time.Time{}
			l.mu.Unlock()
			next := tick(ctx)
			last = time.Now() // the gap counts from the end of a tick
			if !next.IsZero() {
				l.Due(next)
			}
		}
	}()
}
