package gpufaultsreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

// startObserved starts a receiver whose Shutdown waits are wait and whose
// log is returned; the test shuts it down.
func startObserved(t *testing.T, cfg *Config, next consumer.Logs, wait time.Duration) (*gpuFaultsReceiver, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	set.Logger = zap.New(core)
	r, err := newReceiver(cfg, set, next)
	require.NoError(t, err)
	r.wait = wait
	require.NoError(t, r.Start(context.Background(), newElectionHost(t)))
	return r, logs
}

// A next consumer that ignores its context (the remediation exporter
// waiting for its lock behind a console call to a platform that does not
// answer) does not hold Shutdown: it ends after the bound, the record is
// left uncommitted, and the member that comes next gets it again.
func TestShutdownWithANextConsumerThatIgnoresItsContext(t *testing.T) {
	brokers := newCluster(t)
	cfg := testConfig(brokers)
	entered, release := make(chan struct{}), make(chan struct{})
	stuck, err := consumer.NewLogs(func(context.Context, plog.Logs) error {
		close(entered)
		<-release
		return nil
	})
	require.NoError(t, err)
	r, logs := startObserved(t, cfg, stuck, 50*time.Millisecond)
	produce(t, brokers, 0, "in-flight")
	<-entered
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Equal(t, 1, logs.FilterMessage("gpu_faults: the record in flight did not return; leaving it uncommitted").Len())
	close(release) // the loop ends on the closed client
	<-r.done

	rc := newRecorder()
	startMember(t, "b", cfg, rc.member("b"))
	waitFor(t, "the record in flight delivered again", func() bool {
		return len(bodiesBy(rc.deliveries())["in-flight"]) == 1
	})
}

// Kafka unreachable at shutdown: the group cannot be left, Shutdown ends
// after the bound and says a standby takes over after the session timeout.
func TestShutdownWithKafkaDown(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(testPartitions),
		kfake.SeedTopics(testPartitions, semconv.TopicFaults))
	require.NoError(t, err)
	cfg := testConfig(c.ListenAddrs())
	rc := newRecorder()
	r, logs := startObserved(t, cfg, rc.member("a"), 100*time.Millisecond)
	produce(t, c.ListenAddrs(), 0, "before")
	waitFor(t, "the member owns the partitions and delivered", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.countOwned() == testPartitions && len(rc.deliveries()) == 1
	})
	c.Close()
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Equal(t, 1, logs.FilterMessage("gpu_faults: could not leave the consumer group; a standby takes over after session_timeout").Len())
}
