package stepmetricsconnector

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// NVML's names of the models in the table (nvidia-smi --query-gpu=name).
func TestPeakLookup(t *testing.T) {
	table := newPeakTable(nil)
	for model, want := range map[string]float64{
		"NVIDIA H100 80GB HBM3":  989.4e12,
		"NVIDIA H100 SXM5 80GB":  989.4e12,
		"NVIDIA H100 PCIe":       756e12,
		"nvidia h100 pcie":       756e12,
		"NVIDIA H100 NVL":        0,
		"NVIDIA H200":            989.4e12,
		"NVIDIA H200 NVL":        0,
		"NVIDIA A100-SXM4-80GB":  312e12,
		"NVIDIA A100 80GB PCIe":  312e12,
		"NVIDIA L40S":            362e12,
		"NVIDIA L40":             0,
		"NVIDIA L4":              121e12,
		"NVIDIA B200":            2250e12,
		"NVIDIA GB200":           0,
		"Tesla V100-SXM2-32GB":   0,
		"":                       0,
		"\x00\xff garbage model": 0,
	} {
		assert.Equal(t, want, table.lookup(model), model)
		assert.Equal(t, want, table.lookup(model), "cached: "+model)
	}
}

func TestPeakConfiguredOverridesAndExtends(t *testing.T) {
	table := newPeakTable(map[string]float64{"H100 NVL": 835e12, "V100": 125e12, "h100": 1e15})
	assert.Equal(t, 835e12, table.lookup("NVIDIA H100 NVL"))
	assert.Equal(t, 125e12, table.lookup("Tesla V100-SXM2-32GB"))
	assert.Equal(t, 1e15, table.lookup("NVIDIA H100 80GB HBM3"), "configured entry replaces the built-in one")
	assert.Equal(t, 756e12, table.lookup("NVIDIA H100 PCIe"), "a longer built-in key still wins")
}

func TestPeakCacheBounded(t *testing.T) {
	table := newPeakTable(nil)
	for i := 0; i < 10*maxPeakCache; i++ {
		assert.Zero(t, table.lookup("garbage-"+strconv.Itoa(i)))
	}
	assert.Equal(t, 989.4e12, table.lookup("NVIDIA H100 80GB HBM3"), "lookups still work past the cache bound")
	assert.LessOrEqual(t, len(table.cache), maxPeakCache)
}
