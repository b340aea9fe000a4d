package straggler

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Shapes that break naive quickselects: duplicates, runs, sorted input.
func selectionInputs(rng *rand.Rand) map[string][]int64 {
	in := map[string][]int64{
		"one":       {7},
		"two":       {9, 3},
		"all equal": slices.Repeat([]int64{5}, 1001),
		"extremes":  {math.MaxInt64, 0, math.MaxInt64, 1, math.MaxInt64},
	}
	random, dups, sorted, reversed := make([]int64, 999), make([]int64, 1000), make([]int64, 1000), make([]int64, 1000)
	for i := range random {
		random[i] = rng.Int64N(1 << 40)
	}
	for i := range dups {
		dups[i] = rng.Int64N(4)
		sorted[i] = int64(i)
		reversed[i] = int64(len(reversed) - i)
	}
	in["random"], in["few distinct"], in["sorted"], in["reversed"] = random, dups, sorted, reversed
	return in
}

func TestSelectKthMatchesSorting(t *testing.T) {
	const seed = 20250806
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for name, in := range selectionInputs(rng) {
		want := slices.Sorted(slices.Values(in))
		for _, k := range []int{0, len(in) / 2, len(in) - 1, rng.IntN(len(in))} {
			a := slices.Clone(in)
			if got := selectKth(a, k); got != want[k] {
				t.Errorf("%s: selectKth(k=%d) = %d, want %d", name, k, got, want[k])
			}
			for i := range a {
				if (i < k && a[i] > a[k]) || (i > k && a[i] < a[k]) {
					t.Fatalf("%s: k=%d: a[%d]=%d is on the wrong side of a[k]=%d", name, k, i, a[i], a[k])
				}
			}
		}
	}
}

func TestMedianAndNearestRank(t *testing.T) {
	cases := []struct {
		in          []int64
		median      float64
		p99, p50    int64
		description string
	}{
		{nil, 0, 0, 0, "empty"},
		{[]int64{4}, 4, 4, 4, "one value"},
		{[]int64{1, 10}, 5.5, 10, 1, "even length averages the middle two"},
		{[]int64{3, 1, 2}, 2, 3, 2, "odd length"},
		{[]int64{math.MaxInt64, math.MaxInt64}, math.MaxInt64, math.MaxInt64, math.MaxInt64, "no overflow when averaging"},
	}
	for _, c := range cases {
		if got := median(slices.Clone(c.in)); got != c.median {
			t.Errorf("%s: median = %v, want %v", c.description, got, c.median)
		}
		if got := nearestRank(slices.Clone(c.in), 0.99); got != c.p99 {
			t.Errorf("%s: p99 = %v, want %v", c.description, got, c.p99)
		}
		if got := nearestRank(slices.Clone(c.in), 0.5); got != c.p50 {
			t.Errorf("%s: p50 = %v, want %v", c.description, got, c.p50)
		}
	}
	// Nearest rank of 1..100: p99 is the 99th value, not interpolated.
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(100 - i)
	}
	if got := nearestRank(hundred, 0.99); got != 99 {
		t.Errorf("p99 of 1..100 = %d, want 99", got)
	}
}
