package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"container/list"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
)

// storeLimits are the store's bounds (from Config).
type storeLimits struct {
	MaxFaults         int
	ResolvedRetention time.Duration
	MaxJobs           int
	HeatmapSteps      int
	MaxRanks          int
	// MaxHeatmapCells bounds the cells of every heatmap together (16 B
	// each): the least recently updated jobs go first.
	MaxHeatmapCells int
}

// Ack is who acknowledged a fault, when and why.
type Ack = console.Acknowledgement

// faultEntry is one fault with its acknowledgement. elem is its element in
// the open or the resolved list (ordered by recorded).
type faultEntry struct {
	fault    console.Fault
	ack      *Ack
	recorded time.Time // wall time of the newest record
	elem     *list.Element
	inOpen   bool
}

// cell is one rank's step in a heatmap, 16 bytes: times in milliseconds
// as float32 (7 significant digits), the verdict as an index into the
// store's interned verdicts.
type cell struct {
	computeMS  float32
	durationMS float32
	score      float32
	verdict    uint8
	present    bool
}

// decisionSkipped is the remediation audit's decision for a record it did
// not act on (exporter/remediationexporter/internal/audit).
const decisionSkipped = "skipped"

// maxVerdicts bounds the distinct verdict strings interned; further ones
// are kept as "other".
const maxVerdicts = 255

// column is one step of a heatmap: cells indexed by the rank's index.
type column struct {
	cells []cell
}

type jobKey struct {
	job     string
	attempt int64
}

// heat is the heatmap of one (job, attempt).
type heat struct {
	key jobKey
	// rank → index in ranks and in every column's cells: dense for the
	// ranks 0..MaxRanks-1 a job has (index+1, 0: none), a map for others.
	// A decided step records every rank, so this is looked up 16,384
	// times a step for a 16,384-rank job.
	denseIndex []int32
	rankIndex  map[int64]int
	ranks      []int64
	nodes      []string // by rank index
	steps      []int64  // sorted ascending, at most HeatmapSteps
	columns    map[int64]*column
	updated    time.Time
	elem       *list.Element
	// noCommSplit: the newest step recorded said the job's records cannot
	// show a straggler (console.Step.NoCommSplit).
	noCommSplit bool
}

// storeStats are the store's counts.
type storeStats struct {
	OpenFaults     int
	ResolvedFaults int
	Acknowledged   int
	Jobs           int
	EvictedFaults  uint64
	EvictedJobs    uint64
	DroppedSteps   uint64
}

// evictionHook is told of every forgotten fault or job and dropped step,
// under the store's lock: it must only count.
type evictionHook func(kind, reason string)

// store is the bounded in-memory state behind the console: faults,
// acknowledgements and heatmaps. Every method takes one mutex and does
// O(1) work (amortized) on record; reads sort.
type store struct {
	limits storeLimits
	now    func() time.Time
	hook   evictionHook

	mu       sync.Mutex
	faults   map[string]*faultEntry
	open     *list.List // *faultEntry, oldest record first
	resolved *list.List // *faultEntry, oldest record first
	jobs     map[jobKey]*heat
	jobLRU   *list.List // *heat, least recently updated first
	cells    int        // cells of every heatmap together (MaxHeatmapCells)
	verdicts []string   // interned verdicts; index 0 is ""
	verdictI map[string]uint8
	stats    storeStats

	ctrlMu sync.RWMutex
	ctrl   console.Controller
}

func newStore(limits storeLimits, now func() time.Time, hook evictionHook) *store {
	if now == nil {
		now = time.Now
	}
	if hook == nil {
		hook = func(string, string) {}
	}
	return &store{
		limits:   limits,
		now:      now,
		hook:     hook,
		faults:   map[string]*faultEntry{},
		open:     list.New(),
		resolved: list.New(),
		jobs:     map[jobKey]*heat{},
		jobLRU:   list.New(),
		verdicts: []string{""},
		verdictI: map[string]uint8{"": 0},
	}
}

// internVerdict returns v's index, under the lock.
func (s *store) internVerdict(v string) uint8 {
	if i, ok := s.verdictI[v]; ok {
		return i
	}
	if len(s.verdicts) >= maxVerdicts { // "other" takes the last index, 255
		v = "other"
		if i, ok := s.verdictI[v]; ok {
			return i
		}
	}
	i := uint8(len(s.verdicts))
	s.verdicts = append(s.verdicts, v)
	s.verdictI[v] = i
	return i
}

var _ console.Console = (*store)(nil)

// RecordFault implements console.Console.
func (s *store) RecordFault(f console.Fault) {
	if f.ID == "" {
		return
	}
	f.Evidence = cloneMap(f.Evidence)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.faults[f.ID]
	if ok {
		s.unlink(e)
		if f.FirstSeen.IsZero() || (!e.fault.FirstSeen.IsZero() && e.fault.FirstSeen.Before(f.FirstSeen)) {
			f.FirstSeen = e.fault.FirstSeen
		}
		// What remediation did about the fault stays shown: the update
		// records that follow are skipped as already decided, and must not
		// hide the quarantine (or its failure) behind "skipped".
		if f.Decision == decisionSkipped && e.fault.Decision != "" && e.fault.Decision != decisionSkipped {
			f.Decision, f.Action, f.Reason = e.fault.Decision, e.fault.Action, e.fault.Reason
		}
	} else {
		e = &faultEntry{}
		s.faults[f.ID] = e
	}
	// An acknowledgement given through this console stands; one restored
	// from the recorder's audit is taken when the fault has none.
	if e.ack == nil && f.Ack != nil {
		a := *f.Ack
		e.ack = &a
	}
	f.Ack = nil
	e.fault = f
	e.recorded = now
	if f.State == console.StateResolved {
		e.elem, e.inOpen = s.resolved.PushBack(e), false
	} else {
		e.elem, e.inOpen = s.open.PushBack(e), true
	}
	s.pruneLocked(now)
	for len(s.faults) > s.limits.MaxFaults {
		l := s.resolved
		if l.Len() == 0 {
			l = s.open
		}
		s.removeLocked(l.Front().Value.(*faultEntry))
		s.stats.EvictedFaults++
		s.hook("fault", "capacity")
	}
}

func (s *store) unlink(e *faultEntry) {
	if e.inOpen {
		s.open.Remove(e.elem)
	} else {
		s.resolved.Remove(e.elem)
	}
}

func (s *store) removeLocked(e *faultEntry) {
	s.unlink(e)
	delete(s.faults, e.fault.ID)
}

// pruneLocked forgets resolved faults past the retention.
func (s *store) pruneLocked(now time.Time) {
	cutoff := now.Add(-s.limits.ResolvedRetention)
	for s.resolved.Len() > 0 {
		e := s.resolved.Front().Value.(*faultEntry)
		if !e.recorded.Before(cutoff) {
			return
		}
		s.removeLocked(e)
		s.stats.EvictedFaults++
		s.hook("fault", "retention")
	}
}

// RecordStep implements console.Console.
func (s *store) RecordStep(st console.Step) {
	if st.Job == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := jobKey{st.Job, st.Attempt}
	h, ok := s.jobs[k]
	if ok {
		if s.jobLRU.Back() != h.elem {
			s.jobLRU.MoveToBack(h.elem)
		}
	} else {
		h = &heat{key: k, rankIndex: map[int64]int{}, columns: map[int64]*column{}, updated: s.now()}
		h.elem = s.jobLRU.PushBack(h)
		s.jobs[k] = h
		for len(s.jobs) > s.limits.MaxJobs {
			s.evictJob(s.jobLRU.Front().Value.(*heat), "capacity")
		}
	}
	idx, ok := h.index(st.Rank)
	if !ok {
		if len(h.ranks) >= s.limits.MaxRanks {
			s.dropStep("max_ranks")
			return
		}
		idx = len(h.ranks)
		h.setIndex(st.Rank, idx, s.limits.MaxRanks)
		h.ranks = append(h.ranks, st.Rank)
		h.nodes = append(h.nodes, st.Node)
	}
	if st.Node != "" {
		h.nodes[idx] = st.Node
	}
	if n := len(h.steps); n == 0 || st.Step >= h.steps[n-1] {
		h.noCommSplit = st.NoCommSplit // the job's newest word on it
	}
	col, ok := h.columns[st.Step]
	if !ok {
		if len(h.steps) >= s.limits.HeatmapSteps && st.Step < h.steps[0] {
			s.dropStep("old_step")
			return
		}
		// Room for every rank the job has shown: a step fills its column
		// rank by rank, and growing it by appends would copy it again and
		// again.
		col = &column{cells: make([]cell, 0, len(h.ranks))}
		h.updated = s.now() // a new step: once per step, not per rank
		h.columns[st.Step] = col
		if n := len(h.steps); n == 0 || st.Step > h.steps[n-1] {
			h.steps = append(h.steps, st.Step)
		} else {
			i, _ := slices.BinarySearch(h.steps, st.Step)
			h.steps = slices.Insert(h.steps, i, st.Step)
		}
		for len(h.steps) > s.limits.HeatmapSteps {
			s.cells -= len(h.columns[h.steps[0]].cells)
			delete(h.columns, h.steps[0])
			h.steps = h.steps[1:]
		}
	}
	if grow := idx + 1 - len(col.cells); grow > 0 {
		// Older jobs make room first; a job that alone fills the budget
		// loses this step.
		for s.cells+grow > s.limits.MaxHeatmapCells && s.jobLRU.Front().Value.(*heat) != h {
			s.evictJob(s.jobLRU.Front().Value.(*heat), "max_heatmap_cells")
		}
		if s.cells+grow > s.limits.MaxHeatmapCells {
			s.dropStep("max_heatmap_cells")
			return
		}
		col.cells = append(col.cells, make([]cell, grow)...)
		s.cells += grow
	}
	col.cells[idx] = cell{computeMS: ms32(st.Compute), durationMS: ms32(st.Duration), score: float32(st.Score), verdict: s.internVerdict(st.Verdict), present: true}
}

// index is the rank's index in h.ranks.
func (h *heat) index(rank int64) (int, bool) {
	if rank >= 0 && rank < int64(len(h.denseIndex)) {
		i := h.denseIndex[rank]
		return int(i) - 1, i != 0
	}
	i, ok := h.rankIndex[rank]
	return i, ok
}

// setIndex records the rank's index: densely for ranks below maxRanks.
func (h *heat) setIndex(rank int64, idx, maxRanks int) {
	if rank < 0 || rank >= int64(maxRanks) {
		h.rankIndex[rank] = idx
		return
	}
	if need := int(rank) + 1; need > len(h.denseIndex) {
		h.denseIndex = append(h.denseIndex, make([]int32, need-len(h.denseIndex))...)
	}
	h.denseIndex[rank] = int32(idx + 1)
}

// evictJob forgets a job's heatmap. Callers hold s.mu.
func (s *store) evictJob(old *heat, reason string) {
	for _, col := range old.columns {
		s.cells -= len(col.cells)
	}
	s.jobLRU.Remove(old.elem)
	delete(s.jobs, old.key)
	s.stats.EvictedJobs++
	s.hook("job", reason)
}

func (s *store) dropStep(reason string) {
	s.stats.DroppedSteps++
	s.hook("step", reason)
}

// Attach implements console.Console.
func (s *store) Attach(c console.Controller) {
	s.ctrlMu.Lock()
	defer s.ctrlMu.Unlock()
	s.ctrl = c
}

// Detach implements console.Console: it withdraws c if c is the attached
// controller.
func (s *store) Detach(c console.Controller) {
	s.ctrlMu.Lock()
	defer s.ctrlMu.Unlock()
	if sameController(s.ctrl, c) {
		s.ctrl = nil
	}
}

// sameController compares controllers without panicking on uncomparable
// dynamic types.
func sameController(a, b console.Controller) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}

// controller returns the attached controller or console.ErrNoController.
func (s *store) controller() (console.Controller, error) {
	s.ctrlMu.RLock()
	defer s.ctrlMu.RUnlock()
	if s.ctrl == nil {
		return nil, console.ErrNoController
	}
	return s.ctrl, nil
}

// faultView is a fault with its acknowledgement, copied out of the store.
type faultView struct {
	Fault console.Fault
	Ack   *Ack
}

// listFaults returns the faults, newest onset first (then newest record);
// open only unless all.
func (s *store) listFaults(all bool) []faultView {
	s.mu.Lock()
	s.pruneLocked(s.now())
	out := make([]faultView, 0, len(s.faults))
	for _, e := range s.faults {
		if !all && !e.inOpen {
			continue
		}
		out = append(out, e.view())
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Fault, out[j].Fault
		if !a.FirstSeen.Equal(b.FirstSeen) {
			return a.FirstSeen.After(b.FirstSeen)
		}
		if !a.LastSeen.Equal(b.LastSeen) {
			return a.LastSeen.After(b.LastSeen)
		}
		return a.ID < b.ID
	})
	return out
}

func (e *faultEntry) view() faultView {
	v := faultView{Fault: e.fault}
	v.Fault.Evidence = cloneMap(e.fault.Evidence)
	if e.ack != nil {
		a := *e.ack
		v.Ack = &a
	}
	return v
}

// fault returns one fault.
func (s *store) fault(id string) (faultView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(s.now())
	e, ok := s.faults[id]
	if !ok {
		return faultView{}, false
	}
	return e.view(), true
}

// acknowledge keeps op's acknowledgement of the fault id; false when the
// store does not hold it.
func (s *store) acknowledge(id string, op console.Operator) (faultView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.faults[id]
	if !ok {
		return faultView{}, false
	}
	e.ack = &Ack{By: op.Name, Remote: op.Remote, Reason: op.Reason, Time: s.now().UTC()}
	return e.view(), true
}

// stats returns the store's counts.
func (s *store) counts() storeStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(s.now())
	st := s.stats
	st.OpenFaults = s.open.Len()
	st.ResolvedFaults = s.resolved.Len()
	for _, e := range s.faults {
		if e.ack != nil {
			st.Acknowledged++
		}
	}
	st.Jobs = len(s.jobs)
	return st
}

// jobSummary describes one heatmap.
type jobSummary struct {
	Job       string
	Attempt   int64
	Ranks     int
	FirstStep int64
	LastStep  int64
	Steps     int
	Updated   time.Time
	// Stragglers are the ranks with a verdict in the kept steps, with how
	// many steps each.
	Stragglers []rankVerdicts
	// NoCommSplit: the job's step records cannot show a straggler.
	NoCommSplit bool
}

type rankVerdicts struct {
	Rank  int64
	Node  string
	Steps int
}

// listJobs returns the heatmaps, most recently updated first.
func (s *store) listJobs() []jobSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]jobSummary, 0, len(s.jobs))
	for e := s.jobLRU.Back(); e != nil; e = e.Prev() {
		out = append(out, e.Value.(*heat).summary())
	}
	return out
}

func (h *heat) summary() jobSummary {
	js := jobSummary{Job: h.key.job, Attempt: h.key.attempt, Ranks: len(h.ranks), Steps: len(h.steps), Updated: h.updated,
		NoCommSplit: h.noCommSplit}
	if len(h.steps) > 0 {
		js.FirstStep, js.LastStep = h.steps[0], h.steps[len(h.steps)-1]
	}
	counts := map[int]int{}
	for _, st := range h.steps {
		for i, c := range h.columns[st].cells {
			if c.present && c.verdict != 0 {
				counts[i]++
			}
		}
	}
	for i, n := range counts {
		js.Stragglers = append(js.Stragglers, rankVerdicts{Rank: h.ranks[i], Node: h.nodes[i], Steps: n})
	}
	sort.Slice(js.Stragglers, func(i, j int) bool { return js.Stragglers[i].Rank < js.Stragglers[j].Rank })
	return js
}

// heatmapView is one heatmap copied out of the store: ranks ascending,
// steps ascending, Cells[rank][step].
type heatmapView struct {
	Job     string
	Attempt int64
	Ranks   []int64
	Nodes   []string
	Steps   []int64
	Cells   [][]cell
	// Verdicts are the interned verdicts: Cells' verdict indexes them.
	Verdicts []string
	// NoCommSplit: the job's step records cannot show a straggler.
	NoCommSplit bool
}

// heatmap returns the heatmap of job's attempt; attempt < 0 picks the
// highest attempt held.
func (s *store) heatmap(job string, attempt int64) (heatmapView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if attempt < 0 {
		found := false
		for k := range s.jobs {
			if k.job == job && (!found || k.attempt > attempt) {
				attempt, found = k.attempt, true
			}
		}
		if !found {
			return heatmapView{}, false
		}
	}
	h, ok := s.jobs[jobKey{job, attempt}]
	if !ok {
		return heatmapView{}, false
	}
	order := make([]int, len(h.ranks))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return h.ranks[order[a]] < h.ranks[order[b]] })
	v := heatmapView{Job: job, Attempt: attempt, Steps: slices.Clone(h.steps), Verdicts: slices.Clone(s.verdicts),
		NoCommSplit: h.noCommSplit}
	v.Ranks = make([]int64, len(order))
	v.Nodes = make([]string, len(order))
	v.Cells = make([][]cell, len(order))
	for r, i := range order {
		v.Ranks[r], v.Nodes[r] = h.ranks[i], h.nodes[i]
		row := make([]cell, len(h.steps))
		for c, st := range h.steps {
			if cells := h.columns[st].cells; i < len(cells) {
				row[c] = cells[i]
			}
		}
		v.Cells[r] = row
	}
	return v, true
}

func ms32(d time.Duration) float32 { return float32(float64(d) / float64(time.Millisecond)) }

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
