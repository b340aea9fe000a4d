package nvmlsrc

import (
	"context"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:31:00.0": "00000000:31:00.0", // NVML's long form, as is
		"0000:9b:00.0":     "00000000:9B:00.0", // sysfs / kernel log form
		"9b:00.0":          "00000000:9B:00.0", // no domain
		"00000001:b1:1f.7": "00000001:B1:1F.7",
		"":                 "",
		"not a bus id":     "not a bus id",
		"0000:9b:00":       "0000:9b:00",   // no function
		"0000:9g:00.0":     "0000:9g:00.0", // not hex
		"0000:100:00.0":    "0000:100:00.0",
		"0000:9b:20.0":     "0000:9b:20.0", // device > 0x1f
		"0000:9b:00.8":     "0000:9b:00.8", // function > 7
		"1:2:3:4.0":        "1:2:3:4.0",
	} {
		assert.Equal(t, want, normalizeBusID(in), "normalizeBusID(%q)", in)
	}
}

func FuzzNormalizeBusID(f *testing.F) {
	// Bus ids as the fixtures write them: dcgm-exporter labels, nvidia-smi,
	// the kernel log's short form.
	for _, seed := range []string{"00000000:31:00.0", "00000000:01:00.0", "0000:9b:00", "0000:9b:00.0", "00000000:00:07.0", "9b:00.0"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := normalizeBusID(in)
		if out == in {
			return
		}
		// A rewritten id is in the long form, and stays as it is.
		if len(out) != len("00000000:00:00.0") || out != strings.ToUpper(out) {
			t.Fatalf("normalizeBusID(%q) = %q: not the long form", in, out)
		}
		if again := normalizeBusID(out); again != out {
			t.Fatalf("normalizeBusID(%q) = %q, not stable", out, again)
		}
	})
}

func TestBusID(t *testing.T) {
	chars := func(s string) (a [32]int8) {
		for i, c := range []byte(s) {
			a[i] = int8(c)
		}
		return a
	}
	assert.Equal(t, "00000000:31:00.0", busID(nvml.PciInfo{BusId: chars("00000000:31:00.0")}))
	var legacy [16]int8
	for i, c := range []byte("0000:4f:00.0") {
		legacy[i] = int8(c)
	}
	assert.Equal(t, "00000000:4F:00.0", busID(nvml.PciInfo{BusIdLegacy: legacy}))
	assert.Equal(t, "00000000:B1:02.0", busID(nvml.PciInfo{Bus: 0xb1, Device: 2}))
	assert.Empty(t, busID(nvml.PciInfo{}), "0000:00:00.0 is never a GPU")
}

func TestCString(t *testing.T) {
	assert.Equal(t, "abc", cString([]int8{'a', 'b', 'c', 0, 'd'}))
	assert.Equal(t, "ab", cString([]int8{'a', 'b'}))
	assert.Empty(t, cString(nil))
}

func TestMIGProfile(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-40GB MIG 1g.5gb":     "1g.5gb",
		"NVIDIA H100 80GB HBM3 MIG 1g.10gb":    "1g.10gb",
		"NVIDIA H100 80GB HBM3 MIG 1g.10gb+me": "1g.10gb+me",
		"NVIDIA H100 80GB HBM3":                "",
		"":                                     "",
	} {
		assert.Equal(t, want, migProfile(name), "migProfile(%q)", name)
	}
}

func TestNVLinkDiscovery(t *testing.T) {
	srv := newServer()
	// GPU 0 has 18 links (H100); GPU 1 has none (PCIe card).
	tm := telemetryFor(0)
	tm.nvlinkUp = make([]bool, 18)
	tm.nvlinkUp[17] = true
	setTelemetry(mockDevice(srv, 0), tm)
	mockDevice(srv, 1).GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	require.Len(t, s.devices[0].nvlinks, 18)
	assert.Empty(t, s.devices[1].nvlinks)
	assert.Len(t, s.devices[2].nvlinks, 12)

	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldNVLinkCRCFlitErrors})
	require.NoError(t, err)
	assert.Equal(t, []model.Value{{Field: model.FieldNVLinkCRCFlitErrors, Int: 17}}, snap.GPUs[0].Values, "only link 17 is up")
	assert.Empty(t, snap.GPUs[1].Values)
}

func TestMIGDevicesBestEffort(t *testing.T) {
	srv := newServer()
	d := mockDevice(srv, 0)
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 3, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		switch i {
		case 0: // an empty slot
			return nil, nvml.ERROR_NOT_FOUND
		case 1: // ids unknown
			return &mock.Device{
				GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
				GetComputeInstanceIdFunc: func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
				GetNameFunc:              func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED },
				GetMemoryInfo_v2Func:     func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED },
				GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 5 * mib}, nvml.SUCCESS },
			}, nvml.SUCCESS
		}
		return &mock.Device{
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return 7, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return 1, nvml.SUCCESS },
			GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG 2g.10gb", nvml.SUCCESS },
			GetMemoryInfo_v2Func:     func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{Total: 10 * mib}, nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	// MIG mode is off on GPU 1: its MIG calls are never made (they would panic).
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldFBTotal, model.FieldGPUTemp})
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 10, "8 GPUs and 2 MIG devices of GPU 0")
	assert.Nil(t, snap.GPUs[0].GPU.MIG)
	assert.Equal(t, &model.MIGInstance{GPUInstanceID: -1, ComputeInstanceID: -1}, snap.GPUs[1].GPU.MIG)
	assert.Equal(t, []model.Value{{Field: model.FieldFBTotal, Int: 5}}, snap.GPUs[1].Values)
	assert.Equal(t, &model.MIGInstance{GPUInstanceID: 7, ComputeInstanceID: 1, Profile: "2g.10gb"}, snap.GPUs[2].GPU.MIG)
	assert.Equal(t, []model.Value{{Field: model.FieldFBTotal, Int: 10}}, snap.GPUs[2].Values, "no GPU temperature on a MIG device")
	assert.Equal(t, 1, snap.GPUs[3].GPU.Index)
}
