package loadtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protowire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func gatewayConfig(t *testing.T) GatewayConfig {
	doc, err := os.ReadFile(filepath.Join("..", "..", "distributions", "gateway", "config.yaml"))
	require.NoError(t, err)
	cfg, err := ParseGatewayConfig(doc)
	require.NoError(t, err)
	return cfg
}

func TestContribOnlyKeepsContribAndDropsOurs(t *testing.T) {
	full := gatewayConfig(t)
	ownTypes, err := OwnTypes(filepath.Join("..", ".."))
	require.NoError(t, err)
	for _, typ := range []string{"straggler", "faultcorrelator", "stepmetrics", "remediation"} {
		assert.True(t, ownTypes[typ], typ)
	}
	assert.False(t, ownTypes["kafka"])
	contrib, err := full.ContribOnly(ownTypes)
	require.NoError(t, err)

	out, err := contrib.Marshal()
	require.NoError(t, err)
	for _, own := range []string{"straggler", "faultcorrelator", "stepmetrics", "remediation", "detect"} {
		assert.NotContains(t, string(out), own+":", "the baseline still defines %s", own)
	}
	for name, p := range contrib.pipelines() {
		pm, _ := asMap(p)
		for _, key := range []string{"receivers", "processors", "exporters"} {
			for _, id := range asStrings(pm[key]) {
				assert.False(t, ownTypes[componentType(id)], "pipeline %s keeps %s", name, id)
			}
		}
	}
	// The backends' consumer groups stay; the detection groups go.
	assert.ElementsMatch(t, []GroupTopic{
		{"otelcol-gpu-gateway-logs", TopicLogs},
		{"otelcol-gpu-gateway-metrics", TopicMetrics},
		{"otelcol-gpu-gateway-traces", TopicSpans},
	}, contrib.ConsumerGroups())
	assert.True(t, full.HasProcessor("traces", "tail_sampling"), "the gateway samples traces")
	assert.True(t, contrib.HasProcessor("traces", "tail_sampling"), "tail sampling is contrib: the baseline keeps it")
	// The full configuration reads metrics and logs twice, spans once.
	groups := full.ConsumerGroups()
	assert.Len(t, groups, 5)
	assert.True(t, slices.Contains(groups, GroupTopic{"otelcol-gpu-gateway-detect-logs", TopicLogs}))
	assert.False(t, slices.Contains(groups, GroupTopic{"otelcol-gpu-gateway-detect-traces", TopicSpans}))
	// Without detection, the traces pipeline no longer feeds the correlator.
	nodetect, err := full.WithoutDetection()
	require.NoError(t, err)
	out, err = nodetect.Marshal()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "faultcorrelator")
	assert.True(t, nodetect.HasProcessor("traces", "straggler"), "the backends' path keeps the straggler")
}

func TestContribOnlyNeedsAPipeline(t *testing.T) {
	cfg, err := ParseGatewayConfig([]byte("service:\n  pipelines:\n    logs/faults:\n      receivers: [faultcorrelator]\n      exporters: [remediation]\n"))
	require.NoError(t, err)
	_, err = cfg.ContribOnly(map[string]bool{"faultcorrelator": true, "remediation": true})
	assert.Error(t, err)
	_, err = OwnTypes(t.TempDir())
	assert.Error(t, err, "no components there")
	_, err = ParseGatewayConfig([]byte("receivers: {}\n"))
	assert.Error(t, err, "no pipelines")
	_, err = ParseGatewayConfig([]byte("{{{"))
	assert.Error(t, err)
}

func TestParseStat(t *testing.T) {
	// comm with a space and a parenthesis; utime 250, stime 50 ticks.
	stat := "4242 (otel (col) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 1000 200 18446744073709551615"
	d, err := parseStatCPU([]byte(stat))
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, d)
	_, err = parseStatCPU([]byte("4242 (x) S 1 2"))
	assert.Error(t, err)
	_, err = parseStatCPU([]byte("garbage"))
	assert.Error(t, err)

	self, err := CPUTime(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, self, time.Duration(0))
}

func TestParseStatus(t *testing.T) {
	m, err := parseStatusMemory([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	require.NoError(t, err)
	assert.Equal(t, Memory{RSS: 1 << 20, HWM: 2 << 20}, m)
	_, err = parseStatusMemory([]byte("VmRSS:\t1024 kB\n"))
	assert.Error(t, err)
	_, err = parseStatusMemory([]byte("VmRSS:\tx kB\nVmHWM:\t1 kB\n"))
	assert.Error(t, err)

	self, err := MemoryOf(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, self.HWM)
}

func TestSpanMessages(t *testing.T) {
	s := DefaultShape()
	s.Jobs, s.NodesPerJob = 2, 2
	var msgs []*kgo.Record
	spans, errs, err := s.SpanMessages(32*400, time.Unix(0, 0), func(r *kgo.Record) error {
		msgs = append(msgs, r)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 32*400, spans)
	assert.Len(t, msgs, 32*400/8)
	assert.Equal(t, 4, errs, "400 steps of 2 jobs, an error every 200th step of each")
	var un ptrace.ProtoUnmarshaler
	td, err := un.UnmarshalTraces(msgs[0].Value)
	require.NoError(t, err)
	assert.Equal(t, 8, td.SpanCount())
	job, _ := td.ResourceSpans().At(0).Resource().Attributes().Get("training.job.id")
	assert.Equal(t, string(msgs[0].Key), job.Str(), "keyed by job")
}

func TestCountSamples(t *testing.T) {
	// WriteRequest{timeseries: [{labels: [..], samples: [s, s]}, {samples: [s]}]}
	ts1 := []byte{0x0a, 0x02, 0x0a, 0x00, 0x12, 0x00, 0x12, 0x00}
	ts2 := []byte{0x12, 0x00}
	req := append([]byte{0x0a, byte(len(ts1))}, ts1...)
	req = append(req, 0x0a, byte(len(ts2)))
	req = append(req, ts2...)
	n, err := countSamples(req)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	_, err = countSamples([]byte{0x0a, 0x10, 0x01})
	assert.Error(t, err)
}

func TestDecodeRemoteWrite(t *testing.T) {
	label := func(n, v string) []byte {
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, n)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendString(b, v)
	}
	sample := func(ts int64) []byte {
		b := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, 0)
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(ts))
	}
	var ts []byte
	ts = protowire.AppendTag(ts, 1, protowire.BytesType)
	ts = protowire.AppendBytes(ts, label("__name__", "up"))
	for _, at := range []int64{1000, 2000} {
		ts = protowire.AppendTag(ts, 2, protowire.BytesType)
		ts = protowire.AppendBytes(ts, sample(at))
	}
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, ts)
	series, err := DecodeRemoteWrite(req)
	require.NoError(t, err)
	require.Len(t, series, 1)
	assert.Equal(t, map[string]string{"__name__": "up"}, series[0].Labels)
	assert.Equal(t, []int64{1000, 2000}, series[0].Timestamps)
	n, err := countSamples(req)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	_, err = DecodeRemoteWrite(req[:len(req)-3])
	assert.Error(t, err)
}

func TestWithoutDetection(t *testing.T) {
	full := gatewayConfig(t)
	cfg, err := full.WithoutDetection()
	require.NoError(t, err)
	for name := range cfg.pipelines() {
		assert.NotContains(t, name, "detect")
		assert.NotEqual(t, "logs/faults", name, "fed only by the detection pipelines' correlator")
	}
	assert.ElementsMatch(t, []GroupTopic{
		{"otelcol-gpu-gateway-logs", TopicLogs},
		{"otelcol-gpu-gateway-metrics", TopicMetrics},
		{"otelcol-gpu-gateway-traces", TopicSpans},
	}, cfg.ConsumerGroups())
	assert.True(t, cfg.HasProcessor("traces", "straggler"), "the backends' straggler stays")
	out, err := cfg.Marshal()
	require.NoError(t, err)
	assert.NotContains(t, string(out), "faultcorrelator")
	assert.NotContains(t, string(out), "remediation")
	assert.NotContains(t, string(out), "gpu_faults", "remediation's input and detection's output go with detection")
}

// runWith is a run whose spans phase took cpuPerMillion CPU-s per million.
func runWith(config string, cpuPerMillion float64) GatewayRun {
	return GatewayRun{Config: config, Phases: []Phase{{
		Signal: "spans", Produced: 1_000_000, NetCPU: time.Duration(cpuPerMillion * float64(time.Second)),
	}}}
}

func TestRoundsReportTheMedianRatio(t *testing.T) {
	c := &Comparison{Rounds: []Round{
		{Full: runWith("full", 26), ContribOnly: runWith("contrib-only", 20)},                     // 1.30
		{Full: runWith("full", 22), ContribOnly: runWith("contrib-only", 20), ContribFirst: true}, // 1.10
		{Full: runWith("full", 24), ContribOnly: runWith("contrib-only", 20)},                     // 1.20
	}}
	c.Full, c.ContribOnly = c.Rounds[0].Full, c.Rounds[0].ContribOnly
	m, lo, hi := c.MedianRatio("spans")
	assert.InDelta(t, 1.20, m, 1e-9)
	assert.InDelta(t, 1.10, lo, 1e-9)
	assert.InDelta(t, 1.30, hi, 1e-9)

	var out strings.Builder
	c.WriteMarkdown(&out)
	assert.Contains(t, out.String(), "3 rounds")
	assert.Contains(t, out.String(), "| 2 | contrib-only | 22.00 / 20.00 = 1.10 |")
	assert.Contains(t, out.String(), "| **median ratio** (lowest-highest) | | **1.20** (1.10-1.30) |")
	assert.Contains(t, out.String(), "| round | first | spans |\n", "a signal not produced has no column")

	c.Rounds = c.Rounds[:2] // an even count: the mean of the middle two
	m, _, _ = c.MedianRatio("spans")
	assert.InDelta(t, 1.20, m, 1e-9)

	c.Rounds = c.Rounds[:1]
	out.Reset()
	c.WriteMarkdown(&out)
	assert.NotContains(t, out.String(), "rounds", "one round: no table of rounds")
}
