package stragglerprocessor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// stuckNext accepts everything until blocked, then nothing until the
// context of the call ends: the correlator waiting for a hand-off to a full
// gpu_faults queue.
type stuckNext struct {
	mu                  sync.Mutex
	blocked             bool
	calls, withDeadline int
}

func (*stuckNext) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (s *stuckNext) ConsumeTraces(ctx context.Context, _ ptrace.Traces) error {
	s.mu.Lock()
	if !s.blocked {
		s.mu.Unlock()
		return nil
	}
	s.calls++
	if _, ok := ctx.Deadline(); ok {
		s.withDeadline++
	}
	s.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// Shutdown decides the open step and offers it downstream, and ends at the
// loop's bound when nothing downstream accepts: the collector's own context
// never ends (issue 29).
func TestShutdownWithDownstreamBlocked(t *testing.T) {
	next := &stuckNext{}
	h := newHarnessTo(t, defaultConfig(), next)
	h.p.loop.FinalFlushTimeout = 10 * time.Millisecond
	require.NoError(t, h.p.Start(context.Background(), componenttest.NewNopHost()))
	for r := range int64(4) {
		h.send(t, rank{job: "j", step: 1, rank: r, worldSize: 8, ppStage: -1, start: t0, duration: time.Second, compute: 900 * time.Millisecond})
	}
	next.mu.Lock()
	next.blocked = true
	next.mu.Unlock()
	require.NoError(t, h.p.Shutdown(context.Background()))
	next.mu.Lock()
	defer next.mu.Unlock()
	assert.Equal(t, 1, next.calls, "the open step, decided at shutdown")
	assert.Equal(t, 1, next.withDeadline, "the final flush's context has no deadline")
	assert.Equal(t, int64(1), h.counter(t, "otelcol_processor_straggler_steps_decided", ""))
}
