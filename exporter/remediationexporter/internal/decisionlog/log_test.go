package decisionlog

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
)

const topic = "gpu_fault_decisions"

var t0 = time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)

func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func newLog(t testing.TB, c *kfake.Cluster, maxKeys int, logger *zap.Logger) *Log {
	t.Helper()
	cc := configkafka.NewDefaultClientConfig()
	cc.Brokers = c.ListenAddrs()
	l, err := New(context.Background(), Options{Client: cc, Topic: topic, Retention: 24 * time.Hour,
		MaxKeys: maxKeys, Timeout: 10 * time.Second, Logger: logger})
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return l
}

func decision(i int, replica string, at time.Time) Decision {
	id := fmt.Sprintf("fault%04d", i)
	return Decision{Key: id + "/open/P1", FaultID: id, Replica: replica, Time: at,
		Entries: []audit.Entry{{Time: at, Decision: audit.DecisionActed, Step: "quarantine", FaultID: id}}}
}

func TestCatchUpSeesOtherWriters(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, topic))
	a, b := newLog(t, c, 100, zap.NewNop()), newLog(t, c, 100, zap.NewNop())
	ctx := context.Background()

	ds, err := b.CatchUp(ctx, t0)
	require.NoError(t, err)
	assert.Empty(t, ds, "an empty log")

	for i := range 10 {
		require.NoError(t, a.Publish(ctx, decision(i, "a", t0)))
	}
	_, ok := a.Lookup("fault0003/open/P1")
	assert.True(t, ok, "the publisher knows its own decision at once")
	_, ok = b.Lookup("fault0003/open/P1")
	assert.False(t, ok, "not read yet")

	ds, err = b.CatchUp(ctx, t0)
	require.NoError(t, err)
	assert.Len(t, ds, 10)
	d, ok := b.Lookup("fault0003/open/P1")
	require.True(t, ok)
	assert.Equal(t, "a", d.Replica)
	assert.Equal(t, 10, b.Len())

	// A second decision of a key (two replicas racing) keeps the first.
	require.NoError(t, b.Publish(ctx, decision(3, "b", t0)))
	ds, err = a.CatchUp(ctx, t0)
	require.NoError(t, err)
	assert.Empty(t, ds, "nothing new for a: its own ten, and a key it knows")
	d, _ = a.Lookup("fault0003/open/P1")
	assert.Equal(t, "a", d.Replica)
}

// Already current: one ListOffsets round trip and no fetch wait. Also
// after its own publish, which it does not read back.
func TestCatchUpWhenCurrentIsOneRoundTrip(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, topic))
	l := newLog(t, c, 100, zap.NewNop())
	ctx := context.Background()
	require.NoError(t, l.Publish(ctx, decision(0, "other", t0)))
	_, err := l.CatchUp(ctx, t0) // reads nothing: it published it
	require.NoError(t, err)

	var listOffsets atomic.Int32
	c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		listOffsets.Add(1)
		return nil, nil, false
	})
	for i := 1; i <= 5; i++ {
		require.NoError(t, l.Publish(ctx, decision(i, "me", t0)))
		ds, err := l.CatchUp(ctx, t0)
		require.NoError(t, err)
		assert.Empty(t, ds)
	}
	assert.Equal(t, int32(5), listOffsets.Load(), "one ListOffsets per catch-up")
}

func TestRetentionAndCap(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, topic))
	core, logs := observer.New(zapcore.WarnLevel)
	w := newLog(t, c, 100, zap.NewNop())
	ctx := context.Background()
	require.NoError(t, w.Publish(ctx, decision(0, "a", t0.Add(-48*time.Hour)))) // past the retention
	for i := 1; i <= 5; i++ {
		require.NoError(t, w.Publish(ctx, decision(i, "a", t0)))
	}

	r := newLog(t, c, 3, zap.New(core))
	ds, err := r.CatchUp(ctx, t0)
	require.NoError(t, err)
	assert.Len(t, ds, 5, "the expired decision is not returned")
	assert.Equal(t, 3, r.Len(), "capped")
	assert.Equal(t, int64(2), r.Evicted())
	_, ok := r.Lookup("fault0001/open/P1")
	assert.False(t, ok, "the oldest go first")
	_, ok = r.Lookup("fault0005/open/P1")
	assert.True(t, ok)
	assert.Equal(t, 1, logs.Len(), "warned once")

	// Time passes beyond the retention: the set empties.
	_, err = r.CatchUp(ctx, t0.Add(25*time.Hour))
	require.NoError(t, err)
	assert.Zero(t, r.Len())
}

// A topic not created yet is an empty log; the first publish creates it.
func TestMissingTopicIsEmpty(t *testing.T) {
	c := newCluster(t, kfake.AllowAutoTopicCreation())
	l := newLog(t, c, 100, zap.NewNop())
	ctx := context.Background()
	ds, err := l.CatchUp(ctx, t0)
	require.NoError(t, err)
	assert.Empty(t, ds)
	require.NoError(t, l.Publish(ctx, decision(1, "a", t0)))
	other := newLog(t, c, 100, zap.NewNop())
	ds, err = other.CatchUp(ctx, t0)
	require.NoError(t, err)
	assert.Len(t, ds, 1)
}

func TestCatchUpHonoursContext(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, topic))
	w := newLog(t, c, 100, zap.NewNop())
	require.NoError(t, w.Publish(context.Background(), decision(1, "a", t0)))
	// Fetches never answer: the catch-up gives up with its context, which
	// the first fetch cancels.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		cancel()
		return nil, fmt.Errorf("dropped"), true
	})
	r := newLog(t, c, 100, zap.NewNop())
	_, err := r.CatchUp(ctx, t0)
	require.ErrorIs(t, err, context.Canceled)
	_, ok := r.Lookup("fault0001/open/P1")
	assert.False(t, ok)
}
