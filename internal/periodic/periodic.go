// Package periodic runs a component's background work on a ticker between
// its Start and its Shutdown: the flush loops of the stepspan and straggler
// processors, the stepmetrics connector's emission and the fault
// correlator's evaluation. One loop, so that each stops the same way: Stop
// cancels the context the work runs under and waits until the work in
// progress returned, and only then does the component's Shutdown do its
// final flush, bounded in time (StopAndFlush).
package periodic // import "github.com/otelcol-gpu/otelcol-gpu/internal/periodic"

import (
	"context"
	"sync"
	"time"
)

// FinalFlushTimeout bounds a component's final flush at shutdown. The
// collector stops its components one after another with a context that
// never ends, so a final flush into a pipeline whose backend is down (an
// exporter that retries until its context ends, a full queue that blocks)
// would hold the whole process past its grace period (issue 29: a gateway
// still running 90 s after SIGTERM with Prometheus down). What the flush
// could not hand over in this time is refused downstream and counted there
// (the exporter's send_failed or enqueue_failed counters).
const FinalFlushTimeout = 5 * time.Second

// Loop calls a function every interval on its own goroutine. The zero
// value is ready to Start; Stop without Start does nothing.
type Loop struct {
	// FinalFlushTimeout, when above zero, replaces the package's
	// FinalFlushTimeout for this loop (tests).
	FinalFlushTimeout time.Duration

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

// StopAndFlush is a component's Shutdown: Stop, then flush once under ctx
// bounded by FinalFlushTimeout, so that the final flush ends even when
// nothing downstream accepts it.
func (l *Loop) StopAndFlush(ctx context.Context, flush func(context.Context)) {
	l.Stop()
	d := FinalFlushTimeout
	if l.FinalFlushTimeout > 0 {
		d = l.FinalFlushTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	flush(ctx)
}
