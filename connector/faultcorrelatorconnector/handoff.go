package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// Detection hands its records to the next consumer (in the gateway the
// kafka/faults exporter's persistent queue: accepted = on disk) from one
// goroutine, run. An input is acknowledged (its Consume* returns) only
// once the records of the evaluation that includes it are accepted, so a
// Kafka receiver marks an input only when what it caused is durable, and
// redelivers it when the hand-off failed. The consume calls never run rules
// themselves and run never waits on them: each ingests, asks for an
// evaluation and waits for it. Requests that arrive while one runs share
// the next, so a busy gateway evaluates back to back, not once per input.

// errShutdown answers a consume call that waited for an evaluation that
// will not come: its input is not acknowledged.
var errShutdown = errors.New("faultcorrelator: shutting down; input not evaluated")

// Lifecycle states of the correlator.
const (
	stateCreated = iota // consume calls only ingest (tests drive evaluate)
	stateRunning
	stateStopped
)

// round is one requested evaluation and its outcome, shared by the inputs
// that wait for it.
type round struct {
	done    chan struct{}
	err     error
	waiters int // inputs waiting for it (c.mu)
}

// ingest runs observe on the input under c.mu and, while running, waits
// for the evaluation that includes it when it kept a sample (an input that
// kept none can change no rule's result, and returns at once).
func (c *correlator) ingest(ctx context.Context, observe func(now time.Time)) error {
	c.mu.Lock()
	if c.state == stateStopped {
		c.mu.Unlock()
		return errShutdown
	}
	before := c.kept
	observe(c.now())
	if c.state != stateRunning || c.kept == before {
		c.mu.Unlock()
		return nil
	}
	r := c.pending
	if r == nil {
		r = &round{done: make(chan struct{})}
		c.pending = r
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	r.waiters++
	stopped := c.stopped
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-stopped:
		return errShutdown
	}
}

// start launches run. Callers hold no lock.
func (c *correlator) startLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.state = stateRunning
	c.cancel = cancel
	c.mu.Unlock()
	c.runDone = make(chan struct{})
	go c.run(ctx, c.runDone)
}

// stopLoop ends run (cancelling a hand-off in progress) and releases the
// inputs that wait: they are not acknowledged.
func (c *correlator) stopLoop() {
	c.mu.Lock()
	if c.state != stateRunning {
		c.state = stateStopped
		c.mu.Unlock()
		return
	}
	c.state = stateStopped
	close(c.stopped)
	cancel := c.cancel
	c.mu.Unlock()
	cancel()
	<-c.runDone
}

// run evaluates everything on every tick (time-driven rules: node.silent,
// resolution, expiry) and, whenever inputs ask, the entities they changed;
// it tells the inputs of each round how the hand-off of its records went.
// It blocks on nothing but the next consumer's accept.
func (c *correlator) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.EvaluationInterval)
	defer t.Stop()
	for {
		full := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			full = true
		case <-c.wake:
		}
		// Take the round before evaluating: an input ingested after this
		// point may have missed the evaluation, and waits for the next.
		c.mu.Lock()
		r := c.pending
		c.pending = nil
		c.mu.Unlock()
		err := c.evaluateWith(ctx, full)
		if err != nil {
			c.logger.Warn("faultcorrelator: handing off fault records", zap.Error(err))
		}
		if r != nil {
			r.err = err
			close(r.done)
		}
	}
}
