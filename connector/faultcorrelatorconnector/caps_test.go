package faultcorrelatorconnector

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// junkXIDs is n XID records of the given codes (round robin) from host, one
// made-up GPU each: a flood of low-severity faults from one node.
func junkXIDs(host string, n int, at time.Time, codes ...int64) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", host)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i := 0; i < n; i++ {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.Attributes().PutStr("gpu.uuid", "GPU-junk-"+strconv.Itoa(i))
		lr.Attributes().PutInt("gpu.xid", codes[i%len(codes)])
	}
	return ld
}

// xidOn is one XID record from gpu on host.
func xidOn(host, gpu string, code int64, at time.Time) plog.Logs {
	ld := xidLogs(code, at)
	ra := ld.ResourceLogs().At(0).Resource().Attributes()
	ra.PutStr("host.name", host)
	ra.PutStr("gpu.uuid", gpu)
	return ld
}

func opened(rs []fault.Record) map[string]fault.Record {
	out := map[string]fault.Record{}
	for _, r := range rs {
		if r.State == fault.StateOpen {
			out[r.IDType()+" "+r.Entity.String()] = r
		}
	}
	return out
}

// 10,000 forged low-severity XIDs from one node, in one request: a real
// XID 79 on another node and a DBE (XID 48) on the same node still open.
func TestJunkFromOneNodeCrowdsOutNoOne(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	require.NoError(t, c.ConsumeLogs(ctx, junkXIDs("junk", 10_000, t0, 13)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	junk := faults(t, sink)
	assert.Len(t, junk, 16, "max_open_faults_per_source (16) of one XID code on one node")
	assert.Equal(t, 10_000-16, c.dropped)

	require.NoError(t, c.ConsumeLogs(ctx, xidOn("real", "GPU-real", 79, t0.Add(2*time.Second))))
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("junk", "GPU-real-on-junk", 48, t0.Add(2*time.Second))))
	clock.at = t0.Add(3 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := opened(faults(t, sink))
	assert.Contains(t, got, "gpu.fell_off_bus gpu:GPU-real")
	assert.Contains(t, got, "gpu.memory.dbe gpu:GPU-real-on-junk")
	assert.Len(t, got, 2)
}

// Junk of many kinds fills its node's cap; a P1 on that node takes the
// place of a junk fault, one of equal severity does not; the global cap
// works the same way across nodes. Refusals and evictions are counted.
func TestFullCapsEvictTheLeastSevere(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	set := testSettings()
	set.TelemetrySettings.MeterProvider = provider
	cfg := createDefaultConfig().(*Config)
	cfg.MaxOpenFaults, cfg.MaxOpenFaultsPerNode, cfg.MaxOpenFaultsPerSource = 6, 4, 3
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.LogsSink)
	c, err := newCorrelator(cfg, set, sink)
	require.NoError(t, err)
	clock := &fakeClock{at: t0}
	c.now = clock.now
	ctx := context.Background()

	// XID 13 (P3) and 119 (P4) on 10 made-up GPUs of node "junk": 3 of
	// one source, then the node's cap (4).
	require.NoError(t, c.ConsumeLogs(ctx, junkXIDs("junk", 10, t0, 13, 119)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	first := opened(faults(t, sink))
	require.Len(t, first, 4)
	p4 := 0
	for _, r := range first {
		if r.Severity == fault.SeverityP4 {
			p4++
		}
	}
	assert.Equal(t, 1, p4, "the most severe first: three P3, then one P4 fills the node")

	// An XID 31 (P3) on the node takes the place of the P4.
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("junk", "GPU-31", 31, t0.Add(time.Second))))
	clock.at = t0.Add(1500 * time.Millisecond)
	require.NoError(t, c.evaluate(ctx))
	got := opened(faults(t, sink))
	assert.Contains(t, got, "gpu.xid.31 gpu:GPU-31")
	assert.Equal(t, 1, c.evicted)
	// Another XID 31: only P3 left on the node, refused.
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("junk", "GPU-31b", 31, t0.Add(time.Second))))
	// An XID 48 (P1) on the node displaces a P3.
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("junk", "GPU-48", 48, t0.Add(time.Second))))
	clock.at = t0.Add(2 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	got = opened(faults(t, sink))
	assert.Contains(t, got, "gpu.memory.dbe gpu:GPU-48")
	assert.NotContains(t, got, "gpu.xid.31 gpu:GPU-31b")
	assert.Equal(t, 4, len(c.index.byNode["junk"]))
	assert.Equal(t, 2, c.evicted)

	// Two other nodes: the global cap (6) is reached; a P1 on a third
	// evicts the least severe open fault anywhere.
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("b", "GPU-b", 13, t0.Add(2*time.Second))))
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("c", "GPU-c", 13, t0.Add(2*time.Second))))
	clock.at = t0.Add(3 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	assert.Len(t, opened(faults(t, sink)), 2)
	assert.Len(t, c.open, 6)
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("d", "GPU-d", 79, t0.Add(3*time.Second))))
	require.NoError(t, c.ConsumeLogs(ctx, xidOn("e", "GPU-e", 13, t0.Add(3*time.Second))))
	clock.at = t0.Add(4 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	got = opened(faults(t, sink))
	assert.Contains(t, got, "gpu.fell_off_bus gpu:GPU-d")
	assert.NotContains(t, got, "gpu.xid.13 gpu:GPU-e", "P3 with only P1 and P3 open: refused")
	assert.Len(t, c.open, 6)
	assert.Equal(t, 3, c.evicted)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	counts := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			counts[m.Name] = map[string]int64{}
			for _, dp := range sum.DataPoints {
				v, _ := dp.Attributes.Value("cap")
				counts[m.Name][v.AsString()] = dp.Value
			}
		}
	}
	assert.Equal(t, map[string]int64{"max_open_faults_per_node": 2, "max_open_faults": 1}, counts["otelcol_faultcorrelator_faults_evicted"])
	refused := counts["otelcol_faultcorrelator_faults_refused"]
	assert.Positive(t, refused["max_open_faults_per_source"])
	assert.Positive(t, refused["max_open_faults"])
	assert.Equal(t, int64(c.dropped), refused["max_open_faults_per_source"]+refused["max_open_faults_per_node"]+refused["max_open_faults"])
}
