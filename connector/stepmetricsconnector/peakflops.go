package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"sort"
	"strings"
)

// builtinPeakFLOPS is the dense BF16 tensor-core peak FLOP/s of one GPU,
// from the vendor datasheets; sparse (2:4 structured sparsity) figures are
// not used. Keys are lower-case substrings of gpu.model; the longest
// matching key wins, so "h100 pcie" beats "h100" and "l40s" beats "l4".
// A peak of 0 marks a model the table deliberately does not cover (a
// variant whose peak differs from the key it would otherwise match): no
// MFU rather than a wrong one.
var builtinPeakFLOPS = map[string]float64{
	"h100":      989.4e12, // H100 SXM; NVML names it "NVIDIA H100 80GB HBM3"
	"h100 sxm":  989.4e12,
	"h100 pcie": 756e12,
	"h100 nvl":  0,
	"h200":      989.4e12,
	"h200 nvl":  0,
	"a100":      312e12, // SXM and PCIe alike
	"l40s":      362e12,
	"l40":       0, // L40 (not S) is not in the table
	"l4":        121e12,
	"b200":      2250e12,
	"gb200":     0,
}

// peakTable resolves gpu.model to a peak FLOP/s, the configured entries
// over the built-in ones.
type peakTable struct {
	keys  []string // lower case, longest first
	peaks map[string]float64
	cache map[string]float64 // gpu.model as sent → peak (0: unknown)
}

// maxPeakCache bounds the models remembered; beyond it (garbage models)
// each lookup scans the table.
const maxPeakCache = 256

func newPeakTable(configured map[string]float64) *peakTable {
	t := &peakTable{peaks: map[string]float64{}, cache: map[string]float64{}}
	for k, v := range builtinPeakFLOPS {
		t.peaks[k] = v
	}
	for k, v := range configured {
		t.peaks[strings.ToLower(strings.TrimSpace(k))] = v
	}
	for k := range t.peaks {
		t.keys = append(t.keys, k)
	}
	// Longest first; ties in lexical order so that lookups are deterministic.
	sort.Slice(t.keys, func(i, j int) bool {
		a, b := t.keys[i], t.keys[j]
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return a < b
	})
	return t
}

// lookup returns the peak FLOP/s of the model, 0 when unknown. The caller
// serialises calls (the cache is not locked).
func (t *peakTable) lookup(model string) float64 {
	if peak, ok := t.cache[model]; ok {
		return peak
	}
	lower := strings.ToLower(model)
	var peak float64
	for _, k := range t.keys {
		if strings.Contains(lower, k) {
			peak = t.peaks[k]
			break
		}
	}
	if len(t.cache) < maxPeakCache {
		t.cache[model] = peak
	}
	return peak
}
