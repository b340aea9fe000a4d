// Package hang runs calls into drivers that can block forever (a GPU that
// fell off the bus can hang a DCGM or NVML call inside cgo, where it cannot
// be cancelled) with a deadline, so that one stuck GPU neither stalls the
// others nor blocks Shutdown.
package hang // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrStuck means a call did not return within its deadline, or an earlier
// call for the same key still has not returned.
var ErrStuck = errors.New("call did not return in time")

// Guard tracks calls per key (a GPU). While a call for a key is stuck, new
// calls for that key fail at once instead of piling up goroutines.
type Guard struct {
	mu    sync.Mutex
	stuck map[string]bool
	wg    sync.WaitGroup
}

// NewGuard returns an empty Guard.
func NewGuard() *Guard { return &Guard{stuck: map[string]bool{}} }

// Do runs fn in its own goroutine and waits for it until timeout or ctx
// ends. If it does not return in time, Do returns ErrStuck and the key stays
// stuck until fn finally returns.
func (g *Guard) Do(ctx context.Context, key string, timeout time.Duration, fn func() error) error {
	g.mu.Lock()
	if g.stuck[key] {
		g.mu.Unlock()
		return fmt.Errorf("%s: %w (an earlier call has not returned)", key, ErrStuck)
	}
	g.stuck[key] = true // cleared when fn returns
	g.mu.Unlock()

	done := make(chan error, 1)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := fn()
		g.mu.Lock()
		delete(g.stuck, key)
		g.mu.Unlock()
		done <- err
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("%s: %w after %s", key, ErrStuck, timeout)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", key, ctx.Err())
	}
}

// Stuck reports whether a call for key has not returned yet.
func (g *Guard) Stuck(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stuck[key]
}

// Wait waits until every call has returned or ctx ends; Shutdown uses it
// with a short deadline and never waits longer.
func (g *Guard) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
