package gpufaultsreceiver

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/electionextension"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

const testPartitions = 3

// newCluster starts an in-process Kafka-protocol broker with the gpu_faults
// topic, configured as test/kfakebroker configures it.
func newCluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(testPartitions),
		kfake.SeedTopics(testPartitions, semconv.TopicFaults))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// delivery is one record as the next consumer saw it.
type delivery struct {
	member    string
	partition int32
	offset    int64
	body      string
}

// recorder is the next consumer of several receivers: it records every
// delivery and can fail some.
type recorder struct {
	mu    sync.Mutex
	seen  []delivery
	fail  func(d delivery, attempt int) error // nil: accept everything
	tries map[[2]int64]int
}

func newRecorder() *recorder { return &recorder{tries: map[[2]int64]int{}} }

// member returns the consumer.Logs of one receiver.
func (rc *recorder) member(name string) consumer.Logs {
	c, _ := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		md := client.FromContext(ctx).Metadata
		p, _ := strconv.ParseInt(first(md.Get(semconv.MetadataKafkaPartition)), 10, 32)
		o, _ := strconv.ParseInt(first(md.Get(semconv.MetadataKafkaOffset)), 10, 64)
		d := delivery{member: name, partition: int32(p), offset: o,
			body: ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body().Str()}
		if first(md.Get(semconv.MetadataKafkaTopic)) != semconv.TopicFaults {
			d.body = "wrong topic in metadata"
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.seen = append(rc.seen, d)
		key := [2]int64{p, o}
		rc.tries[key]++
		if rc.fail != nil {
			return rc.fail(d, rc.tries[key])
		}
		return nil
	})
	return c
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (rc *recorder) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.seen...)
}

// testConfig is the default config against brokers, with a quick heartbeat
// so that members notice a rebalance soon.
func testConfig(brokers []string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Brokers = brokers
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.SessionTimeout = 6 * time.Second
	cfg.RetryBackoff = RetryBackoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}
	return cfg
}

// member is a started receiver and its telemetry, in a collector of its
// own (its host holds its own election extension).
type member struct {
	name string
	r    *gpuFaultsReceiver
	tt   *componenttest.Telemetry
	host *electionHost
	stop func()
}

// electionHost is a collector's host with the election extension, as
// distributions/gateway/config.yaml runs it.
type electionHost struct {
	exts map[component.ID]component.Component
}

func (h *electionHost) GetExtensions() map[component.ID]component.Component { return h.exts }

// follow is the election as the remediation exporter of this collector
// follows it.
func (h *electionHost) follow(t *testing.T) ownership.Election {
	t.Helper()
	_, seam, err := ownership.FromHost(h)
	require.NoError(t, err)
	require.NotNil(t, seam)
	return seam.Follow(component.MustNewID("remediation"))
}

// newElectionHost starts the real election extension in a host of its own.
func newElectionHost(t *testing.T) *electionHost {
	t.Helper()
	f := electionextension.NewFactory()
	set := extensiontest.NewNopSettings(f.Type())
	set.ID = component.NewID(f.Type())
	ext, err := f.Create(context.Background(), set, f.CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return &electionHost{exts: map[component.ID]component.Component{component.NewID(f.Type()): ext}}
}

func startMember(t *testing.T, name string, cfg *Config, next consumer.Logs) *member {
	t.Helper()
	tt := componenttest.NewTelemetry()
	set := receivertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, name) // one election each
	set.TelemetrySettings = tt.NewTelemetrySettings()
	r, err := newReceiver(cfg, set, next)
	require.NoError(t, err)
	host := newElectionHost(t)
	require.NoError(t, r.Start(context.Background(), host))
	m := &member{name: name, r: r, tt: tt, host: host}
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			require.NoError(t, r.Shutdown(context.Background()))
			require.NoError(t, tt.Shutdown(context.Background()))
		})
	}
	t.Cleanup(m.stop)
	return m
}

func (m *member) owned() int {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	return m.r.countOwned()
}

// counter sums an int64 counter of the member's telemetry over the points
// whose attribute reason is reason ("" for every point); 0 if never recorded.
func (m *member) counter(name, reason string) int64 {
	got, err := m.tt.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := got.Data.(metricdata.Sum[int64])
	if !ok {
		return -1
	}
	var n int64
	for _, dp := range sum.DataPoints {
		if v, _ := dp.Attributes.Value(metadata.TelemetryAttrReason); reason == "" || v.AsString() == reason {
			n += dp.Value
		}
	}
	return n
}

// produce writes one OTLP logs message per body to partition p.
func produce(t *testing.T, brokers []string, p int32, bodies ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	for _, b := range bodies {
		produceRaw(t, cl, p, marshalBody(t, b))
	}
}

// marshalBody is one OTLP logs message with one record of body b.
func marshalBody(t *testing.T, b string) []byte {
	t.Helper()
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr(b)
	v, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	require.NoError(t, err)
	return v
}

// clientOptsForTest is the receiver's own client options for cfg, for a
// producer that must pass the same TLS and SASL.
func clientOptsForTest(t *testing.T, cfg *Config) ([]kgo.Opt, error) {
	return kafkaclient.Options(context.Background(), cfg.ClientConfig, nil, zaptest.NewLogger(t))
}

func produceRaw(t *testing.T, cl *kgo.Client, p int32, value []byte) {
	t.Helper()
	res := cl.ProduceSync(context.Background(), &kgo.Record{Topic: semconv.TopicFaults, Partition: p, Value: value})
	require.NoError(t, res.FirstErr())
}

// waitFor polls cond; the bound is how long a distributed group may take to
// converge, not a speed limit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 60*time.Second, 20*time.Millisecond, what)
}
