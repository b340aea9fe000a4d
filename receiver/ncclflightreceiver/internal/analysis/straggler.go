package analysis

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// The straggler signal. A collective cannot complete before its last rank
// joins, so the rank that enqueues last waits least: its duration_ms (peer
// wait + transfer) is the shortest. Enqueue times come from each node's own
// clock, which differ, so they are compared as offsets within each rank's
// clock from an instant all ranks share: the completion of the previous
// collective of the group (enqueue + duration_ms, or the watchdog's
// completion time when timing is off). A constant lag would cancel out of
// offsets taken from each rank's first entry; from a shared completion it
// does not. When no completion times exist at all, offsets from each rank's
// first aligned collective are used: they only show a lag that grows.
//
// A rank is named only when it is last-to-enqueue (and shortest, when
// durations exist) in at least StragglerMinShare of the scored collectives
// AND its mean lag behind the median rank is at least StragglerMinLag and
// StragglerLagFactor times the usual spread of the other ranks' offsets.
// Random jitter moves "last" between ranks and keeps the lag within the
// spread, so a healthy job is never reported.

const (
	anchorPrevious = "previous_collective_completion"
	anchorFirst    = "first_aligned_collective"
)

// sample is one scored collective.
type sample struct {
	seq       int64
	offsets   []float64 // ns per participant, each in its own clock
	durations []float64 // ms per participant; nil unless every rank has one
}

func findStraggler(g *group, opts Options) (Finding, bool) {
	n := len(g.ranks)
	if n < opts.StragglerMinRanks {
		return Finding{}, false
	}
	var full []*collective // joined by every participant
	for ci := range g.colls {
		if !slicesContainsNil(g.colls[ci].entries) {
			full = append(full, &g.colls[ci])
		}
	}
	anchor := anchorPrevious
	samples := samplesFromPrevious(full)
	if len(samples) < opts.StragglerMinCollectives {
		anchor = anchorFirst
		samples = samplesFromFirst(full)
	}
	if len(samples) < opts.StragglerMinCollectives {
		return Finding{}, false
	}

	last := make([]int, n)     // times each rank enqueued last
	shortest := make([]int, n) // times each rank had the shortest duration
	hits := make([]int, n)     // last and (when known) shortest
	lagSum := make([]float64, n)
	durSum := make([]float64, n)
	durCount := 0
	scratch := make([]float64, n)
	for _, s := range samples {
		// Ranks that enqueued at the same instant (a tie for last) are
		// none of them last: nobody waited for one of them.
		li := argmax(s.offsets)
		if tiedWith(s.offsets, li) {
			li = -1
		} else {
			last[li]++
		}
		med := median(s.offsets, scratch)
		for i, o := range s.offsets {
			lagSum[i] += o - med
		}
		if s.durations == nil {
			if li >= 0 {
				hits[li]++
			}
			continue
		}
		si := argmin(s.durations)
		if !tiedWith(s.durations, si) {
			shortest[si]++
			if si == li {
				hits[li]++
			}
		}
		for i, d := range s.durations {
			durSum[i] += d
		}
		durCount++
	}

	cand := argmaxInt(hits)
	total := float64(len(samples))
	share := float64(hits[cand]) / total
	meanLag := lagSum[cand] / total
	spread := othersSpread(samples, cand)
	if share < opts.StragglerMinShare || meanLag < float64(opts.StragglerMinLag.Nanoseconds()) ||
		meanLag < opts.StragglerLagFactor*spread {
		return Finding{}, false
	}

	rank := g.ranks[cand]
	first, lastSeq := samples[0].seq, samples[len(samples)-1].seq
	ev := map[string]string{
		"anchor":                   anchor,
		"collectives_scored":       strconv.Itoa(len(samples)),
		"seq_range":                fmt.Sprintf("%d-%d", first, lastSeq),
		"last_to_enqueue":          strconv.Itoa(last[cand]),
		"last_and_shortest":        strconv.Itoa(hits[cand]),
		"mean_enqueue_lag_ms":      ms(meanLag),
		"others_enqueue_spread_ms": ms(spread),
	}
	for i, r := range g.ranks {
		ev[rankKey(r, "last_to_enqueue_count")] = strconv.Itoa(last[i])
		ev[rankKey(r, "mean_enqueue_lag_ms")] = ms(lagSum[i] / total)
		if durCount > 0 {
			ev[rankKey(r, "shortest_duration_count")] = strconv.Itoa(shortest[i])
			ev[rankKey(r, "mean_duration_ms")] = strconv.FormatFloat(durSum[i]/float64(durCount), 'f', 3, 64)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Straggler rank %d: enqueued last in %d of %d collectives, sequence numbers %d-%d",
		rank, last[cand], len(samples), first, lastSeq)
	if durCount > 0 {
		ev["shortest_duration"] = strconv.Itoa(shortest[cand])
		fmt.Fprintf(&b, ", and had the shortest duration in %d of %d", shortest[cand], durCount)
	}
	fmt.Fprintf(&b, "\ngroup info: %s\n", groupInfo(g.name, g.desc))
	fmt.Fprintf(&b, "mean enqueue lag behind the median rank: %s ms (other ranks' spread: %s ms)\n", ms(meanLag), ms(spread))
	if durCount > 0 {
		var others float64
		for i := range durSum {
			if i != cand {
				others += durSum[i]
			}
		}
		fmt.Fprintf(&b, "mean duration: rank %d: %.3f ms; other ranks: %.3f ms\n",
			rank, durSum[cand]/float64(durCount), others/float64(durCount*(n-1)))
	}
	if anchor == anchorPrevious {
		b.WriteString("enqueue offsets taken on each rank's own clock from the previous collective's completion")
	} else {
		b.WriteString("enqueue offsets taken on each rank's own clock from its first aligned collective (no completion times)")
	}

	return Finding{
		Kind: KindStraggler, PGID: g.id, PGName: g.name, PGDesc: g.desc,
		Seq: lastSeq, Ranks: []int{rank}, Message: b.String(), Evidence: ev,
	}, true
}

// samplesFromPrevious offsets each collective from the completion of the
// previous fully joined one, on every rank's own clock.
func samplesFromPrevious(full []*collective) []sample {
	var out []sample
	for k := 1; k < len(full); k++ {
		prev, cur := full[k-1], full[k]
		offsets := make([]float64, len(cur.entries))
		ok := true
		for i, e := range cur.entries {
			end, has := endNs(prev.entries[i])
			if !has {
				ok = false
				break
			}
			offsets[i] = float64(e.TimeCreatedNs - end)
		}
		if ok {
			out = append(out, sample{seq: cur.seq, offsets: offsets, durations: durations(cur)})
		}
	}
	return out
}

// samplesFromFirst offsets each collective from the rank's first fully
// joined one.
func samplesFromFirst(full []*collective) []sample {
	if len(full) < 2 {
		return nil
	}
	out := make([]sample, 0, len(full)-1)
	for _, cur := range full[1:] {
		offsets := make([]float64, len(cur.entries))
		for i, e := range cur.entries {
			offsets[i] = float64(e.TimeCreatedNs - full[0].entries[i].TimeCreatedNs)
		}
		out = append(out, sample{seq: cur.seq, offsets: offsets, durations: durations(cur)})
	}
	return out
}

// endNs is when the collective completed on this rank's clock. duration_ms is
// measured with CUDA events from the start; the watchdog's completion time
// is only a poll time, so it is the fallback.
func endNs(e *Op) (int64, bool) {
	if e.HasDuration && e.State == frdump.StateCompleted && validDuration(e.DurationMs) {
		return e.TimeCreatedNs + int64(e.DurationMs*1e6), true
	}
	if e.TimeDiscoveredCompletedNs > 0 {
		return e.TimeDiscoveredCompletedNs, true
	}
	return 0, false
}

func validDuration(d float64) bool { return d >= 0 && d < 1e12 } // false for NaN too

func durations(c *collective) []float64 {
	d := make([]float64, len(c.entries))
	for i, e := range c.entries {
		if !e.HasDuration || !validDuration(e.DurationMs) {
			return nil
		}
		d[i] = e.DurationMs
	}
	return d
}

// othersSpread is the mean, over samples, of max-min of the offsets of every
// rank but skip: how far apart ranks enqueue by chance.
func othersSpread(samples []sample, skip int) float64 {
	var sum float64
	for _, s := range samples {
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, o := range s.offsets {
			if i != skip {
				lo, hi = min(lo, o), max(hi, o)
			}
		}
		if hi >= lo {
			sum += hi - lo
		}
	}
	return sum / float64(len(samples))
}

func slicesContainsNil(entries []*Op) bool {
	for _, e := range entries {
		if e == nil {
			return true
		}
	}
	return false
}

// argmax and argmin return the first index of the extreme value.
func argmax(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

func argmin(v []float64) int {
	best := 0
	for i := range v {
		if v[i] < v[best] {
			best = i
		}
	}
	return best
}

// tiedWith reports whether another element of v equals v[i].
func tiedWith(v []float64, i int) bool {
	for j, x := range v {
		if j != i && x == v[i] {
			return true
		}
	}
	return false
}

func argmaxInt(v []int) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

// median of v, sorting a copy in scratch.
func median(v, scratch []float64) float64 {
	s := scratch[:len(v)]
	copy(s, v)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
