// Package periodic runs a component's background work on a ticker between
// its Start and its Shutdown: the flush loops of the stepspan and straggler
// processors, the stepmetrics connector's emission and the fault
// correlator's evaluation. One loop, so that each stops the same way: Stop
// cancels the context the work runs under and waits until the work in
// progress returned, and only then does the component's Shutdown do its
// final flush.
package periodic // import "github.com/otelcol-gpu/otelcol-gpu/internal/periodic"

import (
	"context"
	"sync"
	"time"
)

// Loop calls a function every interval on its own goroutine. The zero
// value is ready to Start; Stop without Start does nothing.
type Loop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start calls tick every interval until Stop. tick's context is cancelled
// by Stop, so a tick blocked downstream ends with the component.
func (l *Loop) Start(interval time.Duration, tick func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				tick(ctx)
			}
		}
	}()
}

// Stop ends the loop and waits for a tick in progress to return.
func (l *Loop) Stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
}
