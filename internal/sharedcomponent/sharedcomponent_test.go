package sharedcomponent

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type counting struct {
	starts, stops int
}

func (c *counting) Start(context.Context, component.Host) error { c.starts++; return nil }
func (c *counting) Shutdown(context.Context) error              { c.stops++; return nil }

func TestOneInstanceStartedOnceStoppedLast(t *testing.T) {
	m := NewMap[string, *counting]()
	created := 0
	create := func() (*counting, error) { created++; return &counting{}, nil }
	a, err := m.LoadOrStore("cfg", create)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.LoadOrStore("cfg", create)
	if a != b || created != 1 {
		t.Fatalf("two pipelines of one config got %p and %p (%d created)", a, b, created)
	}
	host := componenttest.NewNopHost()
	_ = a.Start(context.Background(), host)
	_ = b.Start(context.Background(), host)
	if a.Inner.starts != 1 {
		t.Fatalf("started %d times", a.Inner.starts)
	}
	_ = a.Shutdown(context.Background())
	if a.Inner.stops != 0 || m.Len() != 1 {
		t.Fatal("stopped while a pipeline still uses it")
	}
	_ = b.Shutdown(context.Background())
	if a.Inner.stops != 1 || m.Len() != 0 {
		t.Fatalf("stops %d, live %d after the last pipeline", a.Inner.stops, m.Len())
	}
}

func TestCreateErrorAndNeverStarted(t *testing.T) {
	m := NewMap[int, *counting]()
	if _, err := m.LoadOrStore(1, func() (*counting, error) { return nil, errors.New("bad") }); err == nil {
		t.Fatal("create error lost")
	}
	c, _ := m.LoadOrStore(2, func() (*counting, error) { return &counting{}, nil })
	if err := c.Shutdown(context.Background()); err != nil || c.Inner.stops != 0 {
		t.Fatal("an instance never started must not be shut down")
	}
}

// Connect hands every pipeline's consumer to the one instance, and returns a
// nil component (not a typed nil) when creating it failed.
func TestConnectEachPipelineToTheOneInstance(t *testing.T) {
	m := NewMap[string, *counting]()
	var connected []*counting
	connect := func(c *counting) { connected = append(connected, c) }
	a, err := m.Connect("cfg", func() (*counting, error) { return &counting{}, nil }, connect)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Connect("cfg", func() (*counting, error) { return &counting{}, nil }, connect)
	if a != b || len(connected) != 2 || connected[0] != connected[1] {
		t.Fatalf("two pipelines of one config: %v and %v, connected %v", a, b, connected)
	}
	bad, err := m.Connect("other", func() (*counting, error) { return nil, errors.New("bad") }, connect)
	if err == nil || bad != nil || len(connected) != 2 {
		t.Fatalf("a create error must return nil and connect nothing: %v %v %d", bad, err, len(connected))
	}
	_ = a.Shutdown(context.Background())
	_ = b.Shutdown(context.Background())
}
