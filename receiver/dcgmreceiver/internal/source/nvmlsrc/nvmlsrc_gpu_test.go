//go:build gpu

package nvmlsrc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// TestRealNVML runs against the NVML of the machine (go test -tags gpu):
// it needs an NVIDIA GPU and driver, so CI does not run it.
func TestRealNVML(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := New(nvml.New(), 0, zaptest.NewLogger(t))
	require.NoError(t, s.Start(ctx, func(e model.XIDEvent) { t.Logf("XID %d on GPU %d", e.Code, e.GPU.Index) }))
	defer func() { require.NoError(t, s.Shutdown(ctx)) }()

	snap, err := s.Collect(ctx, allFields())
	require.NoError(t, err)
	require.NotEmpty(t, snap.GPUs, "no GPU found")
	for _, sample := range snap.GPUs {
		g := sample.GPU
		t.Logf("GPU %d %s %s %s %s driver %s MIG %+v unresponsive %v", g.Index, g.UUID, g.Model, g.PCIBusID, g.Device, g.DriverVersion, g.MIG, sample.Unresponsive)
		for _, v := range sample.Values {
			f, _ := model.FieldByID(v.Field)
			t.Logf("  %-48s %v", f.Name, v.AsFloat())
		}
		require.False(t, sample.Unresponsive)
		assert.True(t, strings.HasPrefix(g.UUID, "GPU-"), "UUID %q", g.UUID)
		assert.Len(t, g.PCIBusID, len("00000000:00:00.0"), "PCI bus id %q", g.PCIBusID)
		assert.True(t, strings.HasPrefix(g.Device, "nvidia"), "device %q", g.Device)
		assert.NotEmpty(t, g.DriverVersion)
		if g.MIG != nil {
			continue
		}
		got := byField(sample.Values)
		require.Contains(t, got, model.FieldGPUTemp)
		temp := got[model.FieldGPUTemp].Int
		assert.True(t, temp > 0 && temp < 130, "GPU temperature %d C", temp)
		assert.Positive(t, got[model.FieldFBTotal].Int, "framebuffer total")
		assert.Contains(t, got, model.FieldXIDErrors, "XID events registered")
		for _, v := range sample.Values {
			f, _ := model.FieldByID(v.Field)
			assert.False(t, f.Profiling, "profiling field %s from NVML", f.Name)
		}
	}
}
