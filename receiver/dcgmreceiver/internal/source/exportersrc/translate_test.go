package exportersrc

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// The real dcgm-exporter scrapes in testdata/ (see testdata/SOURCES.txt).
const (
	fixtureL4      = "cncf-k8s-ai-conformance_kops_NVIDIA-L4_dcgm-exporter-metrics.prom"
	fixtureL40S    = "cncf-k8s-ai-conformance_upcloud_NVIDIA-L40S_dcgm-exporter-metrics.prom"
	fixtureVGPU    = "cncf-k8s-ai-conformance_vks_GRID-A100-10C_dcgm-exporter-metrics.prom"
	fixtureT4      = "cncf-k8s-ai-conformance_ericsson-ccd_Tesla-T4_dcgm-exporter-metrics.prom"
	fixtureREADME  = "dcgm-exporter_README_quickstart-metrics-snippet.prom"
	snapshotTimeNs = 1_700_000_000_000_000_000
)

var allFixtures = []string{fixtureL4, fixtureL40S, fixtureVGPU, fixtureT4, fixtureREADME}

// The profiling fields the L4, L40S and T4 pages carry.
var pageProfilingFields = []model.FieldID{
	model.FieldProfGREngineActive,
	model.FieldProfTensorActive,
	model.FieldProfDRAMActive,
	model.FieldProfPCIeTxBytes,
	model.FieldProfPCIeRxBytes,
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(tb, err)
	return data
}

func translateFixture(t *testing.T, name string) (model.Snapshot, Stats) {
	t.Helper()
	snap, stats, err := Translate(bytes.NewReader(readFixture(t, name)), time.Unix(0, snapshotTimeNs), "")
	require.NoError(t, err)
	return snap, stats
}

// valueOf returns a sample's value of one field.
func valueOf(sample model.GPUSample, id model.FieldID) (model.Value, bool) {
	for _, v := range sample.Values {
		if v.Field == id {
			return v, true
		}
	}
	return model.Value{}, false
}

func mustValue(t *testing.T, sample model.GPUSample, id model.FieldID) model.Value {
	t.Helper()
	v, ok := valueOf(sample, id)
	require.Truef(t, ok, "field %d missing", id)
	return v
}

func TestTranslateL4(t *testing.T) {
	snap, stats := translateFixture(t, fixtureL4)
	assert.Equal(t, time.Unix(0, snapshotTimeNs), snap.Time)
	require.Len(t, snap.GPUs, 1)
	gpu := snap.GPUs[0]
	assert.Equal(t, model.GPU{
		Index:         0,
		UUID:          "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c",
		Model:         "NVIDIA L4",
		PCIBusID:      "00000000:31:00.0",
		Device:        "nvidia0",
		DriverVersion: "580.105.08",
	}, gpu.GPU)
	assert.True(t, gpu.Owner.IsZero())

	assert.Equal(t, model.Value{Field: model.FieldSMClock, Float: 210, IsFloat: true}, mustValue(t, gpu, model.FieldSMClock))
	assert.Equal(t, model.Value{Field: model.FieldPowerUsage, Float: 16.365, IsFloat: true}, mustValue(t, gpu, model.FieldPowerUsage))
	// A counter with an integral value is an Int.
	assert.Equal(t, model.Value{Field: model.FieldTotalEnergy, Int: 4742776}, mustValue(t, gpu, model.FieldTotalEnergy))
	assert.Equal(t, model.Value{Field: model.FieldFBFree, Float: 22563, IsFloat: true}, mustValue(t, gpu, model.FieldFBFree))
	assert.Equal(t, model.Value{Field: model.FieldProfPCIeTxBytes, Float: 112603, IsFloat: true}, mustValue(t, gpu, model.FieldProfPCIeTxBytes))
	for _, id := range pageProfilingFields {
		_, ok := valueOf(gpu, id)
		assert.Truef(t, ok, "profiling field %d missing", id)
	}
	// 23 samples on the page, all catalogued.
	assert.Equal(t, Stats{Values: 23}, stats)
	assert.Len(t, gpu.Values, 23)
	assertSortedByField(t, gpu)
}

func TestTranslateL40S(t *testing.T) {
	snap, stats := translateFixture(t, fixtureL40S)
	require.Len(t, snap.GPUs, 1)
	gpu := snap.GPUs[0]
	assert.Equal(t, "GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43", gpu.GPU.UUID)
	assert.Equal(t, "NVIDIA L40S", gpu.GPU.Model)
	assert.Equal(t, "595.58.03", gpu.GPU.DriverVersion)
	assert.Equal(t, model.Value{Field: model.FieldTotalEnergy, Int: 5551899580}, mustValue(t, gpu, model.FieldTotalEnergy))
	assert.Equal(t, model.Value{Field: model.FieldPowerUsage, Float: 35.686, IsFloat: true}, mustValue(t, gpu, model.FieldPowerUsage))
	assert.Equal(t, model.Value{Field: model.FieldProfDRAMActive, Float: 0.000131, IsFloat: true}, mustValue(t, gpu, model.FieldProfDRAMActive))
	for _, id := range pageProfilingFields {
		_, ok := valueOf(gpu, id)
		assert.Truef(t, ok, "profiling field %d missing", id)
	}
	assert.Equal(t, Stats{Values: 23}, stats)
}

func TestTranslateVGPUHasNoProfilingFieldsNorXID(t *testing.T) {
	snap, stats := translateFixture(t, fixtureVGPU)
	require.Len(t, snap.GPUs, 1)
	gpu := snap.GPUs[0]
	assert.Equal(t, "GRID A100-10C", gpu.GPU.Model)
	assert.Equal(t, model.Value{Field: model.FieldSMClock, Float: 1410, IsFloat: true}, mustValue(t, gpu, model.FieldSMClock))
	for _, v := range gpu.Values {
		field, ok := model.FieldByID(v.Field)
		require.True(t, ok)
		assert.Falsef(t, field.Profiling, "vGPU page has profiling field %s", field.Name)
		assert.NotEqual(t, model.FieldXIDErrors, v.Field)
	}
	assert.Equal(t, Stats{Values: 11}, stats)
}

func TestTranslateWithoutHelpAndTypeLines(t *testing.T) {
	snap, stats := translateFixture(t, fixtureT4)
	require.Len(t, snap.GPUs, 1)
	gpu := snap.GPUs[0]
	assert.Equal(t, model.GPU{
		UUID:          "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a",
		Model:         "Tesla T4",
		PCIBusID:      "00000000:37:00.0",
		Device:        "nvidia0",
		DriverVersion: "590.48.01",
	}, gpu.GPU)
	// Untyped on the page, a counter in the catalogue: still an Int.
	assert.Equal(t, model.Value{Field: model.FieldTotalEnergy, Int: 15152422938}, mustValue(t, gpu, model.FieldTotalEnergy))
	assert.Equal(t, model.Value{Field: model.FieldPowerUsage, Float: 68.244, IsFloat: true}, mustValue(t, gpu, model.FieldPowerUsage))
	assert.Equal(t, model.Value{Field: model.FieldProfGREngineActive, Float: 0.156205, IsFloat: true}, mustValue(t, gpu, model.FieldProfGREngineActive))
	assert.Equal(t, Stats{Values: 20}, stats)
}

func TestTranslateDropsSentinel(t *testing.T) {
	snap, stats := translateFixture(t, fixtureREADME)
	require.Len(t, snap.GPUs, 1)
	gpu := snap.GPUs[0]
	assert.Equal(t, model.GPU{UUID: "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"}, gpu.GPU)
	assert.Equal(t, []model.Value{
		{Field: model.FieldSMClock, Float: 139, IsFloat: true},
		{Field: model.FieldMemClock, Float: 405, IsFloat: true},
	}, gpu.Values)
	assert.Equal(t, Stats{Values: 2, Sentinels: 1}, stats)
}

func TestTranslateNeverEmitsSentinels(t *testing.T) {
	for _, name := range allFixtures {
		t.Run(name, func(t *testing.T) {
			snap, _ := translateFixture(t, name)
			require.NotEmpty(t, snap.GPUs)
			assertNoSentinels(t, snap)
		})
	}
}

func assertNoSentinels(t testing.TB, snap model.Snapshot) {
	t.Helper()
	for _, sample := range snap.GPUs {
		for _, v := range sample.Values {
			if v.IsFloat {
				assert.Falsef(t, model.IsBlankFloat64(v.Float) || math.IsInf(v.Float, 0), "field %d: float %v emitted", v.Field, v.Float)
			} else {
				assert.Falsef(t, model.IsBlankInt64(v.Int), "field %d: int %v emitted", v.Field, v.Int)
			}
		}
	}
}

func assertSortedByField(t testing.TB, sample model.GPUSample) {
	t.Helper()
	for i := 1; i < len(sample.Values); i++ {
		assert.Less(t, sample.Values[i-1].Field, sample.Values[i].Field)
	}
}

func TestTranslateGroupsByGPUMIGAndOwner(t *testing.T) {
	page := `# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="10",UUID="GPU-j"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-c",GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",pod="b",namespace="ns",container="c"} 41
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-c",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",GPU_CI_ID="1"} 42
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-c",pci_bus_id="00000000:02:00.0",exported_pod="old",pod="new",pod_name="oldest",namespace="ns"} 43
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-c",exported_pod="p2",exported_namespace="ns2",exported_container="c2"} 44
DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-c",GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",pod="a",namespace="ns",container="c"} 45
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="2",UUID="GPU-c",modelName="NVIDIA A100",exported_pod="p2",exported_namespace="ns2",exported_container="c2"} 100.5
`
	snap, stats, err := Translate(strings.NewReader(page), time.Unix(1, 0), "")
	require.NoError(t, err)
	assert.Equal(t, Stats{Values: 7}, stats)

	type row struct {
		index int
		mig   string
		owner model.Owner
		temp  float64
	}
	var got []row
	for _, s := range snap.GPUs {
		mig := ""
		if s.GPU.MIG != nil {
			mig = fmt.Sprintf("%d/%d/%s", s.GPU.MIG.GPUInstanceID, s.GPU.MIG.ComputeInstanceID, s.GPU.MIG.Profile)
		}
		got = append(got, row{s.GPU.Index, mig, s.Owner, mustValue(t, s, model.FieldGPUTemp).Float})
	}
	assert.Equal(t, []row{
		{2, "", model.Owner{PodName: "new", Namespace: "ns"}, 43},
		{2, "", model.Owner{PodName: "p2", Namespace: "ns2", Container: "c2"}, 44},
		{2, "2/1/3g.40gb", model.Owner{}, 42},
		{2, "9/0/1g.10gb", model.Owner{PodName: "a", Namespace: "ns", Container: "c"}, 45},
		{2, "9/0/1g.10gb", model.Owner{PodName: "b", Namespace: "ns", Container: "c"}, 41},
		{10, "", model.Owner{}, 40},
	}, got)
	assert.Equal(t, "00000000:02:00.0", snap.GPUs[0].GPU.PCIBusID)
	// Identity labels found on a later sample complete the GPU.
	assert.Equal(t, "NVIDIA A100", snap.GPUs[1].GPU.Model)
	assert.Equal(t, 100.5, mustValue(t, snap.GPUs[1], model.FieldPowerUsage).Float)
}

func TestTranslateCountsWhatItSkips(t *testing.T) {
	page := `# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{UUID="GPU-no-index"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="x"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="-1"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="0",GPU_I_PROFILE="1g.10gb"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="0",GPU_I_ID="1",GPU_CI_ID="z"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="0"} NaN
DCGM_FI_DEV_GPU_TEMP{gpu="0"} -Inf
DCGM_FI_DEV_GPU_TEMP{gpu="0"} +Inf
DCGM_FI_DEV_GPU_TEMP{gpu="0"} 140737488355328
DCGM_FI_DEV_GPU_TEMP{gpu="0"} 30
DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h"} 31
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL summary
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",quantile="0.5"} 1
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL_sum{gpu="0"} 1
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL_count{gpu="0"} 1
DCGM_FI_DRIVER_VERSION{gpu="0"} 1
DCGM_FI_DEV_SOMETHING_NEW{gpu="0"} 1
go_goroutines 12
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1"} 9223372036854775794
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="2"} 200000000000000
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu="2"} 1.5
DCGM_FI_DEV_XID_ERRORS{gpu="2"} 79 1700000000123
`
	snap, stats, err := Translate(strings.NewReader(page), time.Unix(1, 0), "")
	require.NoError(t, err)
	assert.Equal(t, Stats{Values: 4, Unknown: 3, Sentinels: 3, Bad: 8, Duplicates: 1}, stats)
	assertNoSentinels(t, snap)

	require.Len(t, snap.GPUs, 2)
	assert.Equal(t, []model.Value{{Field: model.FieldGPUTemp, Float: 30, IsFloat: true}}, snap.GPUs[0].Values)
	// A counter above the fp64 sentinel but below the int64 one is real.
	assert.Equal(t, []model.Value{
		{Field: model.FieldTotalEnergy, Int: 200000000000000},
		{Field: model.FieldPCIeReplayCounter, Float: 1.5, IsFloat: true},
		{Field: model.FieldXIDErrors, Float: 79, IsFloat: true, Time: time.UnixMilli(1700000000123)},
	}, snap.GPUs[1].Values)
}

func TestTranslateGarbageIsAnError(t *testing.T) {
	for name, page := range map[string]string{
		"html":        "<html><body>Not Found</body></html>",
		"bad value":   `DCGM_FI_DEV_GPU_TEMP{gpu="0"} hot`,
		"open braces": `DCGM_FI_DEV_GPU_TEMP{gpu="0" 1`,
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Translate(strings.NewReader(page), time.Unix(1, 0), "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "dcgmreceiver: exporter: parsing metrics text")
		})
	}
}

func TestTranslateEmptyPage(t *testing.T) {
	snap, stats, err := Translate(strings.NewReader(""), time.Unix(1, 0), "")
	require.NoError(t, err)
	assert.Empty(t, snap.GPUs)
	assert.Equal(t, Stats{}, stats)
}

func FuzzTranslate(f *testing.F) {
	for _, name := range allFixtures {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte(`DCGM_FI_DEV_GPU_TEMP{gpu="0",GPU_I_ID="1",GPU_CI_ID="0",GPU_I_PROFILE="1g.5gb",pod="p"} 1e300`))
	f.Add([]byte("# TYPE DCGM_FI_DEV_XID_ERRORS histogram\nDCGM_FI_DEV_XID_ERRORS_bucket{le=\"+Inf\"} 1\n"))
	f.Fuzz(func(t *testing.T, page []byte) {
		snap, stats, err := Translate(bytes.NewReader(page), time.Unix(1, 0), "")
		if err != nil {
			return
		}
		assertNoSentinels(t, snap)
		values := 0
		for i, sample := range snap.GPUs {
			values += len(sample.Values)
			assertSortedByField(t, sample)
			if i > 0 {
				assert.LessOrEqual(t, compareSamples(snap.GPUs[i-1], sample), 0)
			}
		}
		assert.Equal(t, stats.Values, values)
	})
}

// eightGPUPage builds a ~64 KB dcgm-exporter page of 8 GPUs from the L40S
// scrape: each family's HELP and TYPE once, then one sample per GPU with
// its own gpu, UUID, PCI bus id and device, attributed to a training pod as
// on a GPU Operator node.
func eightGPUPage(tb testing.TB) []byte {
	tb.Helper()
	const fixtureLabels = `gpu="0",UUID="GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43",pci_bus_id="00000000:00:07.0",device="nvidia0"`
	var page bytes.Buffer
	scanner := bufio.NewScanner(bytes.NewReader(readFixture(tb, fixtureL40S)))
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "#") {
			page.WriteString(line + "\n")
			continue
		}
		require.Containsf(tb, line, fixtureLabels, "unexpected line %q", line)
		name, value, _ := strings.Cut(line, "} ")
		for gpu := range 8 {
			labels := fmt.Sprintf(`gpu="%d",UUID="GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc4%d",pci_bus_id="00000000:00:0%d.0",device="nvidia%d"`, gpu, gpu, gpu, gpu)
			fmt.Fprintf(&page, `%s,container="pytorch",namespace="training-team-vision",pod="resnet152-imagenet-ddp-worker-%d-5f7c9d8b6-x2x9k"} %s`+"\n",
				strings.Replace(name, fixtureLabels, labels, 1), gpu, value)
		}
	}
	require.NoError(tb, scanner.Err())
	return page.Bytes()
}

func TestEightGPUPage(t *testing.T) {
	page := eightGPUPage(t)
	assert.InDelta(t, 64<<10, len(page), 6<<10, "page size")
	snap, stats, err := Translate(bytes.NewReader(page), time.Unix(1, 0), "")
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 8)
	for i, sample := range snap.GPUs {
		assert.Equal(t, i, sample.GPU.Index)
		assert.Equal(t, fmt.Sprintf("GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc4%d", i), sample.GPU.UUID)
		assert.Equal(t, fmt.Sprintf("resnet152-imagenet-ddp-worker-%d-5f7c9d8b6-x2x9k", i), sample.Owner.PodName)
		assert.Len(t, sample.Values, 23)
	}
	assert.Equal(t, Stats{Values: 184}, stats)
}

func BenchmarkTranslate8GPU64KB(b *testing.B) {
	page := eightGPUPage(b)
	now := time.Unix(1, 0)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Translate(bytes.NewReader(page), now, ""); err != nil {
			b.Fatal(err)
		}
	}
}
