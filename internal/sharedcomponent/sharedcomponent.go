// Package sharedcomponent lets one receiver instance serve every pipeline
// its config appears in (metrics, logs, traces): the collector asks the
// factory once per pipeline, and each ask must get the same instance, started
// once and stopped after its last pipeline stops. The map lives in the
// factory value, never in a package variable.
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
// first time. Every call counts one pipeline that will call Shutdown.
func (m *Map[K, C]) LoadOrStore(key K, create func() (C, error)) (*Component[K, C], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.items[key]; ok {
		c.refs++
		return c, nil
	}
	inner, err := create()
	if err != nil {
		return nil, err
	}
	c := &Component[K, C]{m: m, key: key, Inner: inner, refs: 1}
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
	m       *Map[K, C]
	key     K
	Inner   C
	refs    int
	started bool
}

// Start starts the instance the first time any of its pipelines starts.
func (c *Component[K, C]) Start(ctx context.Context, host component.Host) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if c.started {
		return nil
	}
	c.started = true
	return c.Inner.Start(ctx, host)
}

// Shutdown stops the instance when its last pipeline stops.
func (c *Component[K, C]) Shutdown(ctx context.Context) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.refs--
	if c.refs > 0 {
		return nil
	}
	delete(c.m.items, c.key)
	if !c.started {
		return nil
	}
	return c.Inner.Shutdown(ctx)
}
