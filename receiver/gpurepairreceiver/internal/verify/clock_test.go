package verify

import (
	"sync"
	"time"
)

// fakeClock fires AfterFunc callbacks when the test advances it, and tells
// the test each time a callback is scheduled, so a test knows the code
// under test waits before it moves time on.
type fakeClock struct {
	mu        sync.Mutex
	now       time.Time
	timers    []*fakeTimer
	scheduled chan struct{}
}

type fakeTimer struct {
	at            time.Time
	f             func()
	stopped, done bool
}

func newFakeClock(start time.Time) *fakeClock {
	return &fakeClock{now: start, scheduled: make(chan struct{}, 64)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	c.scheduled <- struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.done || t.stopped {
			return false
		}
		t.stopped = true
		return true
	}
}

// waitScheduled blocks until the code under test scheduled a callback.
func (c *fakeClock) waitScheduled() { <-c.scheduled }

// Advance moves time on and runs the callbacks that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if !t.done && !t.stopped && !t.at.After(c.now) {
			t.done = true
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}
