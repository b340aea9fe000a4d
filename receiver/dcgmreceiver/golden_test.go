package dcgmreceiver

import (
	"bufio"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/exportersrc"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg/kmsgtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var goldenTime = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// Real dcgm-exporter scrapes (L4 and L40S with profiling fields, a vGPU
// without, the README snippet with a sentinel) go through the exporter
// source's translation and the receiver's metric building, under both
// namings.
func TestGoldenMetrics(t *testing.T) {
	fixtures := map[string]string{
		"l4":      "cncf-k8s-ai-conformance_kops_NVIDIA-L4_dcgm-exporter-metrics.prom",
		"l40s":    "cncf-k8s-ai-conformance_upcloud_NVIDIA-L40S_dcgm-exporter-metrics.prom",
		"vgpu":    "cncf-k8s-ai-conformance_vks_GRID-A100-10C_dcgm-exporter-metrics.prom",
		"snippet": "dcgm-exporter_README_quickstart-metrics-snippet.prom",
	}
	for name, fixture := range fixtures {
		for _, naming := range []string{NamingOTel, NamingDCGMExporter} {
			t.Run(name+"_"+naming, func(t *testing.T) {
				f, err := os.Open(filepath.Join("internal", "source", "exportersrc", "testdata", fixture))
				require.NoError(t, err)
				defer f.Close()
				snap, _, err := exportersrc.Translate(f, goldenTime, "")
				require.NoError(t, err)
				b := newMetricsBuilder(naming, "xl003", "test", pcommon.NewTimestampFromTime(goldenTime.Add(-time.Hour)))
				owner := func(s model.GPUSample) model.Owner {
					if !s.Owner.IsZero() {
						return s.Owner
					}
					return model.Owner{PodName: "llama-70b-worker-0", Namespace: "training", Container: "pytorch", TrainingJobID: "llama-70b"}
				}
				counts := map[string]map[int]int64{}
				for _, g := range snap.GPUs {
					counts[gpuKey(g.GPU)] = map[int]int64{48: 1, 119: 5}
				}
				actual := b.build(snap, owner, counts)

				path := filepath.Join("testdata", "golden", name+"_"+naming+".yaml")
				if *update {
					require.NoError(t, golden.WriteMetrics(t, path, actual))
				}
				expected, err := golden.ReadMetrics(path)
				require.NoError(t, err)
				require.NoError(t, pmetrictest.CompareMetrics(expected, actual,
					pmetrictest.IgnoreTimestamp(),
					pmetrictest.IgnoreStartTimestamp(),
					pmetrictest.IgnoreMetricsOrder(),
					pmetrictest.IgnoreMetricDataPointsOrder(),
					pmetrictest.IgnoreResourceMetricsOrder()))
			})
		}
	}
}

// The real kernel log with five XID 119 occurrences becomes five records.
func TestGoldenXIDLogs(t *testing.T) {
	f, err := os.Open(filepath.Join("internal", "source", "kmsg", "testdata", "gpud_dmesg-with-xid-119.log"))
	require.NoError(t, err)
	defer f.Close()
	xids, err := newXIDCatalogue(nil)
	require.NoError(t, err)
	lb := &logsBuilder{hostName: "xl003", version: "test", xids: xids}
	gpu := model.GPU{Index: 4, UUID: "GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43", Model: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:9B:00.0", DriverVersion: "570.86.15"}
	owner := model.Owner{SlurmJobID: "4242", TrainingJobID: "llama-70b"}

	actual := plog.NewLogs()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		at, msg, ok := kmsgtest.ParseDmesgLine(sc.Text(), time.UTC)
		if !ok {
			continue
		}
		ev, ok, err := kmsg.ParseXIDLine(msg)
		require.NoError(t, err)
		if !ok {
			continue
		}
		require.True(t, equalBusID(ev.PCIBusID, gpu.PCIBusID), "bus id %s", ev.PCIBusID)
		ld := lb.xidLogs(model.XIDEvent{Time: at, GPU: gpu, Code: ev.Code, Message: ev.Message, PID: ev.PID, ProcessName: ev.ProcessName, Source: kmsg.SourceName}, gpu, owner, goldenTime)
		ld.ResourceLogs().MoveAndAppendTo(actual.ResourceLogs())
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 5, actual.LogRecordCount())

	path := filepath.Join("testdata", "golden", "xid119_logs.yaml")
	if *update {
		require.NoError(t, golden.WriteLogs(t, path, actual))
	}
	expected, err := golden.ReadLogs(path)
	require.NoError(t, err)
	require.NoError(t, plogtest.CompareLogs(expected, actual))
}
