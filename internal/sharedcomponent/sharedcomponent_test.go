package sharedcomponent

import (
	"context"
	"errors"
	"sync"
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

// Like contrib's sharedcomponent: started by the first Start, stopped by
// the first Shutdown, once each, and gone from the map once stopped.
func TestOneInstanceStartedOnceStoppedFirst(t *testing.T) {
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
	if a.Inner.stops != 1 || m.Len() != 0 {
		t.Fatalf("stops %d, live %d after the first pipeline's shutdown", a.Inner.stops, m.Len())
	}
	_ = b.Shutdown(context.Background())
	if a.Inner.stops != 1 || m.Len() != 0 {
		t.Fatalf("stops %d, live %d after the last pipeline", a.Inner.stops, m.Len())
	}
	if err := a.Start(context.Background(), host); err != nil || a.Inner.starts != 1 {
		t.Fatalf("a stopped instance started again: %v, %d starts", err, a.Inner.starts)
	}
	// A reloaded collector asks again with the same key: a new instance.
	c, _ := m.LoadOrStore("cfg", create)
	if c == a || created != 2 {
		t.Fatalf("the stopped instance was handed out again (%d created)", created)
	}
	_ = c.Shutdown(context.Background())
}

type failingStop struct{ stops int }

func (f *failingStop) Start(context.Context, component.Host) error { return nil }
func (f *failingStop) Shutdown(context.Context) error {
	f.stops++
	return errors.New("stop failed")
}

// Every pipeline's Shutdown reports the one real Shutdown's error.
func TestShutdownErrorReportedToEveryPipeline(t *testing.T) {
	m := NewMap[string, *failingStop]()
	a, _ := m.LoadOrStore("cfg", func() (*failingStop, error) { return &failingStop{}, nil })
	b, _ := m.LoadOrStore("cfg", nil)
	_ = a.Start(context.Background(), componenttest.NewNopHost())
	errA, errB := a.Shutdown(context.Background()), b.Shutdown(context.Background())
	if errA == nil || errB == nil || a.Inner.stops != 1 {
		t.Fatalf("errors %v and %v, %d stops", errA, errB, a.Inner.stops)
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
	if m.Len() != 0 {
		t.Fatalf("%d instances live after every shutdown", m.Len())
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

// stoppable stands for a pipeline's exporter: once shut down, a call is a
// bug (the kafka exporter dereferenced its closed client: a panic).
type stoppable struct {
	mu      sync.Mutex
	stopped bool
	late    int
}

func (e *stoppable) consume() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		e.late++
	}
}

func (e *stoppable) shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
}

// emitter stands for a receiver shared by several pipelines (dcgm,
// ncclflight): while running, each collection goes to every pipeline's
// consumer.
type emitter struct {
	mu      sync.Mutex
	running bool
	next    []*stoppable
}

func (r *emitter) Start(context.Context, component.Host) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = true
	return nil
}

func (r *emitter) Shutdown(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	return nil
}

func (r *emitter) collect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running {
		return
	}
	for _, e := range r.next {
		e.consume()
	}
}

// Regression (issue 19): a receiver in a metrics and a logs pipeline. The
// collector stops its graph in a topological order, and this one is valid:
// the metrics pipeline's receiver node, the metrics exporter, then the logs
// pipeline's receiver node and exporter. Kept running until the last
// pipeline stopped, the receiver went on calling the stopped metrics
// exporter between the second and third steps (a nil dereference there).
func TestSharedReceiverNeverCallsAStoppedExporter(t *testing.T) {
	m := NewMap[string, *emitter]()
	metricsExp, logsExp := &stoppable{}, &stoppable{}
	create := func() (*emitter, error) { return &emitter{}, nil }
	metricsRecv, err := m.Connect("cfg", create, func(r *emitter) { r.next = append(r.next, metricsExp) })
	if err != nil {
		t.Fatal(err)
	}
	logsRecv, _ := m.Connect("cfg", create, func(r *emitter) { r.next = append(r.next, logsExp) })
	ctx, host := context.Background(), componenttest.NewNopHost()
	_ = metricsRecv.Start(ctx, host)
	_ = logsRecv.Start(ctx, host)
	inner := metricsRecv.(*Component[string, *emitter]).Inner
	inner.collect()
	if metricsExp.late+logsExp.late != 0 {
		t.Fatal("a call before any shutdown counted as late")
	}
	steps := []func(){
		func() { _ = metricsRecv.Shutdown(ctx) },
		metricsExp.shutdown,
		func() { _ = logsRecv.Shutdown(ctx) },
		logsExp.shutdown,
	}
	for i, step := range steps {
		step()
		inner.collect() // the receiver's loop does not wait for the next step
		if metricsExp.late+logsExp.late != 0 {
			t.Fatalf("after shutdown step %d the receiver called a stopped exporter (metrics %d, logs %d calls)",
				i+1, metricsExp.late, logsExp.late)
		}
	}
}
