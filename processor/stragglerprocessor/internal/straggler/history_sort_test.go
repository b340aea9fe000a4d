package straggler

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// sortSmall orders what slices.Sort orders, for every length a history
// holds, with repeated values among them.
func TestSortSmallMatchesSlicesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= baselineWindow; n++ {
		for trial := 0; trial < 200; trial++ {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r.IntN(8)) * 1e6 // few distinct values: ties
				if trial%2 == 1 {
					v[i] = float32(r.Int64N(1 << 40))
				}
			}
			want := slices.Clone(v)
			slices.Sort(want)
			sortSmall(v)
			if !slices.Equal(v, want) {
				t.Fatalf("n=%d: sortSmall gave %v, slices.Sort %v", n, v, want)
			}
		}
	}
}

func BenchmarkBaseline(b *testing.B) {
	var h rankHistory
	for i := range baselineWindow {
		h.push(int64(1e9 + (i*7919)%13*1e6))
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = h.baseline()
	}
}
