// Package sharedcomponent lets one receiver instance serve every pipeline
// its config appears in (metrics, logs, traces): the collector asks the
// factory once per pipeline, and each ask must get the same instance,
// started once and stopped once. The map lives in the factory value, never
// in a package variable.
//
// Like contrib's internal/sharedcomponent, the instance stops on the FIRST
// Shutdown call, not the last. The collector stops its graph upstream
// first: each pipeline's receiver node before that pipeline's processors
// and exporters, but one pipeline's exporter may stop before another
// pipeline's receiver node. An instance kept running until its last
// pipeline stops would go on calling the consumers of a pipeline whose
// exporter is already stopped (a panic in the exporter). Stopping on the
// first call stops it before any of its pipelines' exporters.
package sharedcomponent // import "github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Map holds the shared instances of one factory, keyed by config.
type Map[K comparable, C component.Component] struct {
	mu    sync.Mutex
	items map[K]*Component[K, C]
}

// NewMap returns an empty Map.
func NewMap[K comparable, C component.Component]() *Map[K, C] {
	return &Map[K, C]{items: map[K]*Component[K, C]{}}
}

// LoadOrStore returns the instance for key, creating it with create the
// first time (or the first time after the instance of key was shut down:
// a reloaded collector gets a new instance).
func (m *Map[K, C]) LoadOrStore(key K, create func() (C, error)) (*Component[K, C], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.items[key]; ok {
		return c, nil
	}
	inner, err := create()
	if err != nil {
		return nil, err
	}
	c := &Component[K, C]{m: m, key: key, Inner: inner}
	m.items[key] = c
	return c, nil
}

// Connect is LoadOrStore, then connect(instance): each pipeline that shares
// the instance hands it that pipeline's consumer. It returns the instance
// as a component.Component, nil on error, which every create function of a
// factory can return as its receiver or connector.
func (m *Map[K, C]) Connect(key K, create func() (C, error), connect func(C)) (component.Component, error) {
	c, err := m.LoadOrStore(key, create)
	if err != nil {
		return nil, err
	}
	connect(c.Inner)
	return c, nil
}

// Len reports how many instances are live (for tests).
func (m *Map[K, C]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

// Component is one shared instance.
type Component[K comparable, C component.Component] struct {
	m     *Map[K, C]
	key   K
	Inner C

	// mu orders Start and Shutdown of this instance; it is not held by the
	// Map, so that a slow Start or Shutdown never blocks other instances.
	mu      sync.Mutex
	started bool
	stopped bool
	stopErr error
}

// Start starts the instance the first time any of its pipelines starts.
// Later calls return nil (the first one reported any error); an instance
// already shut down is not started again.
func (c *Component[K, C]) Start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.stopped {
		return nil
	}
	c.started = true
	return c.Inner.Start(ctx, host)
}

// Shutdown stops the instance on the first call of any of its pipelines
// and removes it from the map; later calls return the first call's result.
// An instance never started is not shut down.
func (c *Component[K, C]) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	c.m.mu.Lock()
	if c.m.items[c.key] == c {
		delete(c.m.items, c.key)
	}
	c.m.mu.Unlock()
	if c.started {
		c.stopErr = c.Inner.Shutdown(ctx)
	}
	return c.stopErr
}
