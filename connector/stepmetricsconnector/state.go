package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"math"
	"sort"
	"time"
)

// closeReason says how a step came to be folded into the metrics.
type closeReason int

const (
	closeComplete closeReason = iota // every rank of training.world_size arrived
	closeTimeout                     // step_timeout after its first rank
	closeEvicted                     // max_open_steps reached
	closeShutdown                    // the connector stopped
	numCloseReasons
)

var closeReasonNames = [numCloseReasons]string{"complete", "timeout", "evicted", "shutdown"}

// jobKey is one attempt of one job: a restarted job starts afresh.
type jobKey struct {
	job     string
	attempt int64
}

// jobState is everything kept for one job attempt.
type jobState struct {
	start    time.Time // the histogram's start time
	lastSeen time.Time
	open     map[int64]*openStep
	closed   closedSteps
	hist     histogram
	win      window
	// updated: a record was used or a step closed since the last
	// emission. Only updated job attempts are emitted (README.md: a job
	// that moved to another gateway must not go on reporting a frozen
	// series beside the new one).
	updated bool
}

// closedWindow is how far below the newest closed step the closed steps
// are remembered, so that steps completing out of order are not taken for
// late ones.
const closedWindow = 256

// closedSteps remembers which steps were closed: a bit for each of the
// closedWindow steps up to the newest closed one (32 bytes a job). A
// record of a closed step, or of a step older than the window, is late.
type closedSteps struct {
	newest int64 // -1: none yet
	bits   [closedWindow / 64]uint64
}

func (c *closedSteps) bit(step int64) (word int, mask uint64) {
	i := step % closedWindow
	return int(i / 64), uint64(1) << (i % 64)
}

// has reports whether the step was closed, or is too old to tell.
func (c *closedSteps) has(step int64) bool {
	switch {
	case step > c.newest:
		return false
	case c.newest-step >= closedWindow:
		return true
	}
	w, m := c.bit(step)
	return c.bits[w]&m != 0
}

func (c *closedSteps) add(step int64) {
	if step > c.newest {
		if c.newest < 0 || step-c.newest >= closedWindow {
			c.bits = [closedWindow / 64]uint64{}
		} else {
			// Steps entering the window were not closed yet. Counted from
			// newest, not up to step: step may be math.MaxInt64.
			for n := int64(1); n <= step-c.newest; n++ {
				w, m := c.bit(c.newest + n)
				c.bits[w] &^= m
			}
		}
		c.newest = step
	}
	if c.newest-step < closedWindow {
		w, m := c.bit(step)
		c.bits[w] |= m
	}
}

// openStep accumulates the ranks' records of one step until it closes.
type openStep struct {
	step      int64
	first     time.Time
	worldSize int64
	ranks     int64
	seen      rankSet
	maxDur    time.Duration

	tokens     float64
	tokenRanks int
	shareSum   float64
	shareRanks int
	flops      float64
	peakSum    float64 // Σ peak FLOP/s of the ranks that reported FLOPs
}

// window sums the steps closed since the last emission; the gauges are
// computed from it.
type window struct {
	steps        int
	tokens       float64
	tokenSeconds float64 // Σ step duration of the steps with tokens
	shareSum     float64 // Σ per-step mean data-load share
	shareSteps   int
	flops        float64
	peakFLOP     float64 // Σ step duration × Σ peak FLOP/s of the ranks with FLOPs
}

func newJobState(now time.Time, buckets int) *jobState {
	return &jobState{
		start:    now,
		lastSeen: now,
		open:     map[int64]*openStep{},
		closed:   closedSteps{newest: -1},
		hist:     histogram{counts: make([]uint64, buckets+1)},
	}
}

// add folds one rank's record into its step; false and the reason when the
// record is not used. A step closes as soon as all its ranks arrived.
func (j *jobState) add(r *stepRecord, now time.Time, maxOpen int, bounds []float64, closed func(closeReason)) (dropReason, bool) {
	s := j.open[r.step]
	if s == nil {
		if j.closed.has(r.step) {
			return dropLate, false
		}
		if len(j.open) >= maxOpen {
			lowest := j.lowestOpen()
			if r.step < lowest.step {
				return dropTooManyOpenSteps, false
			}
			j.closeStep(lowest, bounds)
			closed(closeEvicted)
		}
		s = &openStep{step: r.step, first: now, worldSize: r.worldSize}
		s.seen.grow(r.worldSize)
		j.open[r.step] = s
	}
	if s.worldSize == 0 {
		s.worldSize = r.worldSize
	}
	if s.worldSize > 0 && r.rank >= s.worldSize {
		return dropRankOutOfRange, false
	}
	if !s.seen.add(r.rank) {
		return dropDuplicateRank, false
	}
	s.fold(r)
	j.lastSeen = now
	j.updated = true
	if s.worldSize > 0 && s.ranks >= s.worldSize {
		j.closeStep(s, bounds)
		closed(closeComplete)
	}
	return 0, true
}

func (s *openStep) fold(r *stepRecord) {
	s.ranks++
	s.maxDur = max(s.maxDur, r.duration)
	if r.hasTokens {
		s.tokens += r.tokens
		s.tokenRanks++
	}
	if r.hasDataloadShare {
		s.shareSum += r.dataloadShare
		s.shareRanks++
	}
	if r.hasFlops {
		s.flops += r.flops
		s.peakSum += r.peak
	}
}

func (j *jobState) lowestOpen() *openStep {
	var lowest *openStep
	for _, s := range j.open {
		if lowest == nil || s.step < lowest.step {
			lowest = s
		}
	}
	return lowest
}

// closeStep folds a step into the histogram and the window. The step's
// duration is the longest of its ranks: the job's step is not over until
// its slowest rank is.
func (j *jobState) closeStep(s *openStep, bounds []float64) {
	secs := s.maxDur.Seconds()
	j.hist.record(secs, bounds)
	j.win.steps++
	if s.tokenRanks > 0 {
		j.win.tokens += s.tokens
		j.win.tokenSeconds += secs
	}
	if s.shareRanks > 0 {
		j.win.shareSum += s.shareSum / float64(s.shareRanks)
		j.win.shareSteps++
	}
	if s.peakSum > 0 {
		j.win.flops += s.flops
		j.win.peakFLOP += secs * s.peakSum
	}
	j.closed.add(s.step)
	delete(j.open, s.step)
	j.updated = true
}

// closeDue closes the steps open for step_timeout (all of them when
// final), in step order so that float sums do not depend on map order.
func (j *jobState) closeDue(now time.Time, timeout time.Duration, final bool, bounds []float64, closed func(closeReason)) {
	var due []*openStep
	for _, s := range j.open {
		if final || now.Sub(s.first) >= timeout {
			due = append(due, s)
		}
	}
	sort.Slice(due, func(a, b int) bool { return due[a].step < due[b].step })
	for _, s := range due {
		j.closeStep(s, bounds)
		if final {
			closed(closeShutdown)
		} else {
			closed(closeTimeout)
		}
	}
}

// Gauge values of the window; false when no closed step reported the
// inputs, or the value would not be finite.

// tokensRate is Σ tokens / Σ step duration over the steps closed.
func (w *window) tokensRate() (float64, bool) {
	return finiteRatio(w.tokens, w.tokenSeconds)
}

// dataloadShare is the mean over the steps closed of each step's mean over
// ranks of dataload_ns / the rank's step duration.
func (w *window) dataloadShare() (float64, bool) {
	return finiteRatio(w.shareSum, float64(w.shareSteps))
}

// mfu is Σ FLOPs / Σ (step duration × Σ ranks' peak FLOP/s).
func (w *window) mfu() (float64, bool) {
	return finiteRatio(w.flops, w.peakFLOP)
}

func finiteRatio(num, den float64) (float64, bool) {
	if !(den > 0) {
		return 0, false
	}
	v := num / den
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

// histogram is a cumulative explicit-bucket histogram of seconds.
type histogram struct {
	counts   []uint64 // len(bounds)+1
	count    uint64
	sum      float64
	min, max float64
}

func (h *histogram) record(v float64, bounds []float64) {
	// Bucket i holds (bounds[i-1], bounds[i]], as OTLP defines it.
	h.counts[sort.SearchFloat64s(bounds, v)]++
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if h.count == 0 || v > h.max {
		h.max = v
	}
	h.count++
	h.sum += v
}

// rankSet is a bitset of the ranks seen in one step: world_size/8 bytes,
// at most max_ranks/8.
type rankSet []uint64

func (s *rankSet) grow(ranks int64) {
	if words := int((ranks + 63) / 64); words > len(*s) {
		grown := make(rankSet, words)
		copy(grown, *s)
		*s = grown
	}
}

// add marks the rank; false when it was already there.
func (s *rankSet) add(rank int64) bool {
	s.grow(rank + 1)
	word, bit := rank/64, uint64(1)<<(rank%64)
	if (*s)[word]&bit != 0 {
		return false
	}
	(*s)[word] |= bit
	return true
}
