package dcgmreceiver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// refusingLogs refuses every record while full is set, as the agent's
// Kafka queue does when it is full, and keeps what it accepts.
type refusingLogs struct {
	mu       sync.Mutex
	full     bool
	refused  int
	accepted []plog.Logs
}

func (c *refusingLogs) setFull(full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.full = full
}

func (*refusingLogs) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *refusingLogs) ConsumeLogs(_ context.Context, ld plog.Logs) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.full {
		c.refused++
		return errors.New("sending queue is full")
	}
	c.accepted = append(c.accepted, ld)
	return nil
}

func (c *refusingLogs) snapshot() (refused int, accepted []plog.Logs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused, append([]plog.Logs(nil), c.accepted...)
}

// XID records refused while the queue is full are offered again, in order,
// and each is delivered once when it has room again: no fault signal is
// lost to a full queue that refuses instead of blocking (issue 29).
func TestRefusedXIDRecordsAreOfferedAgain(t *testing.T) {
	at := time.Unix(1_790_000_000, 0)
	src := &fakeSource{snaps: []model.Snapshot{snapshot(at)}}
	env := newTestEnv(t, fastConfig(), src)
	next := &refusingLogs{full: true}
	env.r.nextLogs = next
	env.start(t)
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) > 0 }, 10*time.Second, 5*time.Millisecond, "the source runs")

	for i, code := range []int{79, 48, 13} {
		src.xid(model.XIDEvent{Time: at.Add(time.Duration(i) * time.Second), GPU: model.GPU{UUID: testGPU.UUID}, Code: code, Source: "dcgm"})
	}
	require.Eventually(t, func() bool { n, _ := next.snapshot(); return n >= 4 }, 10*time.Second, 5*time.Millisecond,
		"refused at arrival, then offered again")
	next.setFull(false)
	require.Eventually(t, func() bool { _, got := next.snapshot(); return len(got) == 3 }, 10*time.Second, 5*time.Millisecond)
	_, got := next.snapshot()
	var codes []int64
	for _, ld := range got {
		v, _ := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().Get(semconv.AttrGPUXID)
		codes = append(codes, v.Int())
	}
	assert.Equal(t, []int64{79, 48, 13}, codes, "each once, in order")
	assert.Equal(t, 1, env.logObs.FilterMessageSnippet("XID record refused by the logs pipeline").Len(), "logged once per episode")
	assert.Equal(t, 1, env.logObs.FilterMessageSnippet("accepts XID records again").Len())
}

// A GPU that stops answering while the queue refuses is reported once it
// has room: the change is not forgotten with the refused record.
func TestRefusedUnresponsiveRecordIsReportedAgain(t *testing.T) {
	hung := snapshot(time.Unix(1_790_000_000, 0))
	hung.GPUs[0].Unresponsive = true
	src := &fakeSource{snaps: []model.Snapshot{hung}}
	env := newTestEnv(t, fastConfig(), src)
	next := &refusingLogs{full: true}
	env.r.nextLogs = next
	env.start(t)
	require.Eventually(t, func() bool { n, _ := next.snapshot(); return n >= 2 }, 10*time.Second, 5*time.Millisecond)
	next.setFull(false)
	require.Eventually(t, func() bool { _, got := next.snapshot(); return len(got) == 1 }, 10*time.Second, 5*time.Millisecond)
	_, got := next.snapshot()
	assert.Equal(t, semconv.EventGPUHang, got[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).EventName())
	time.Sleep(50 * time.Millisecond) // more collections: still one record
	_, got = next.snapshot()
	assert.Len(t, got, 1, "reported once when accepted, not once per collection")
}
