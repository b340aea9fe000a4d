package provenanceprocessor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// passing are the keys a receiver writes that a sender may send too: the
// workload and the generic conventions. Anything else a hardware receiver
// writes must leave the processor under forged.
var passing = map[string]bool{
	"host.name": true, "service.name": true, "service.instance.id": true,
	"training.job.id": true, "training.rank": true, "training.world_size": true,
	"process.pid": true, "process.executable.name": true, "slurm.job.id": true,
	"k8s.pod.name": true, "k8s.namespace.name": true, "k8s.container.name": true,
	"error.type": true, "network.io.direction": true,
}

// receiverOutput is what a hardware receiver writes, by its golden files.
func receiverOutput(dir string) string {
	return filepath.Join("..", "..", "receiver", dir, "testdata", "golden")
}

type check struct {
	t    *testing.T
	file string
	// labels: check every attribute key (false for the dcgm_exporter
	// naming, whose labels are dcgm-exporter's: Hostname, UUID, ...).
	labels bool
}

func (c check) attrs(where string, m pcommon.Map) {
	if !c.labels {
		return
	}
	for k := range m.All() {
		if !strings.HasPrefix(k, "forged.") && !passing[k] {
			c.t.Errorf("%s: %s attribute %q passed unrenamed", c.file, where, k)
		}
	}
}

func (c check) resource(m pcommon.Map) {
	v, _ := m.Get("host.name")
	assert.Equal(c.t, own, v.AsString(), "%s: host.name", c.file)
	for k := range m.All() {
		if !strings.HasPrefix(k, "forged.") && !passing[k] && c.labels {
			c.t.Errorf("%s: resource attribute %q passed unrenamed", c.file, k)
		}
	}
}

// The GPU, IB and NCCL receivers' real output, replayed to node-a's OTLP
// port before its first scrape: every metric, record and span leaves
// naming node-a, every metric name and every attribute but the workload's
// under forged., every GPU claim too (fail closed).
func TestReceiversOutputReplayedOverOTLP(t *testing.T) {
	metricFiles, err := filepath.Glob(filepath.Join(receiverOutput("dcgmreceiver"), "*.yaml"))
	require.NoError(t, err)
	ib, err := filepath.Glob(filepath.Join(receiverOutput("ibreceiver"), "*.yaml"))
	require.NoError(t, err)
	nccl, err := filepath.Glob(filepath.Join(receiverOutput("ncclflightreceiver"), "*.yaml"))
	require.NoError(t, err)
	files := append(append(metricFiles, ib...), nccl...)
	require.GreaterOrEqual(t, len(files), 10, "the receivers' golden files")

	h := newHarness(t, false)
	mp, msink := h.metrics(t)
	lp, lsink := h.logsProcessor(t)
	tp, tsink := h.traces(t)
	seen := map[string]int{}
	for _, f := range files {
		c := check{t: t, file: filepath.Base(f), labels: !strings.Contains(f, "dcgm_exporter")}
		if md, err := golden.ReadMetrics(f); err == nil && md.ResourceMetrics().Len() > 0 {
			msink.Reset()
			require.NoError(t, mp.ConsumeMetrics(context.Background(), md))
			c.metrics(msink.AllMetrics()[0])
			seen["metrics"]++
			continue
		}
		if ld, err := golden.ReadLogs(f); err == nil && ld.ResourceLogs().Len() > 0 {
			lsink.Reset()
			require.NoError(t, lp.ConsumeLogs(context.Background(), ld))
			c.logs(lsink.AllLogs()[0])
			seen["logs"]++
			continue
		}
		td, err := golden.ReadTraces(f)
		require.NoError(t, err, f)
		require.Positive(t, td.ResourceSpans().Len(), f)
		tsink.Reset()
		require.NoError(t, tp.ConsumeTraces(context.Background(), td))
		c.traces(tsink.AllTraces()[0])
		seen["traces"]++
	}
	assert.Positive(t, seen["metrics"])
	assert.Positive(t, seen["logs"])
	assert.Positive(t, seen["traces"])
	r := h.rejected(t)
	assert.Positive(t, r["host_name"])
	assert.Positive(t, r["gpu"])
	assert.Positive(t, r["hardware_signal"])
}

func (c check) metrics(md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		c.resource(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if !strings.HasPrefix(m.Name(), "forged.") {
					c.t.Errorf("%s: metric %q passed unrenamed", c.file, m.Name())
				}
				var points pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					points = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					points = m.Sum().DataPoints()
				case pmetric.MetricTypeHistogram:
					for p := 0; p < m.Histogram().DataPoints().Len(); p++ {
						c.attrs("point", m.Histogram().DataPoints().At(p).Attributes())
					}
					continue
				default:
					continue
				}
				for p := 0; p < points.Len(); p++ {
					c.attrs("point", points.At(p).Attributes())
				}
			}
		}
	}
}

func (c check) logs(ld plog.Logs) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		c.resource(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				c.attrs("record", lr.Attributes())
				if n := lr.EventName(); n != "" && !strings.HasPrefix(n, "forged.") {
					c.t.Errorf("%s: event name %q passed unrenamed", c.file, n)
				}
			}
		}
	}
}

func (c check) traces(td ptrace.Traces) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		c.resource(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				c.attrs("span", spans.At(k).Attributes())
			}
		}
	}
}
