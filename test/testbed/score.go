package testbed

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Report is the outcome of one run.
type Report struct {
	Seed      uint64
	Ranks     int
	Scenarios []ScenarioResult
	// Types holds precision and recall per fault type, sorted by type.
	Types      []TypeResult
	Duration   time.Duration
	BadRecords int // records the correlator emitted that did not parse
	// Unattributed are open records naming no simulated job, node or GPU.
	Unattributed []string
	StepPeriod   time.Duration
}

// ScenarioResult is what one scenario's job produced.
type ScenarioResult struct {
	Name         string
	HardNegative bool
	// Found holds, per expectation, the delay from onset to its first open
	// record; negative when it never opened.
	Found []time.Duration
	// Opened are the distinct faults opened on the job ("type entity").
	Opened []string
	// FalsePositives are the opened faults no expectation or allowance
	// covers, and those over the scenario's max_other_faults.
	FalsePositives []string
	// DetectSteps holds, per expectation, the steps from the onset to its
	// first open record's arrival (stepsUntil); -1 when it never opened.
	DetectSteps []int
	// MaxDetectSteps is the scenario's bound (0: none).
	MaxDetectSteps int
	// Late are the expectations found later than max_detect_steps after
	// the onset (their indexes).
	Late []int
	// OtherFaults counts the opened faults no expectation matches
	// (allowed ones included); TooManyOthers: more than max_other_faults.
	OtherFaults   int
	TooManyOthers bool
	// FirstSeenErrors holds, per expectation, its first open record's
	// fault.first_seen less the injection's onset on the injected node's
	// clock (issue 30; 0 when it never opened); FirstSeenWrong the
	// expectations found beyond the scenario's max_first_seen_error (their
	// indexes).
	FirstSeenErrors []time.Duration
	FirstSeenWrong  []int
	// Warnings counts the straggler processor's job warnings that named the
	// job, by kind, and WrongWarnings says where they differ from the
	// scenario's warnings; both nil where the run did not hold the
	// collector's logs (Cluster.Score).
	Warnings      map[string]int
	WrongWarnings []string
}

// TypeResult is the detection quality for one fault type.
type TypeResult struct {
	Type           fault.Type
	Expected       int // required detections
	Detected       int
	Opened         int // distinct open records of the type
	FalsePositives int
	TimesToOpen    []time.Duration
	// StepsToConfirm, for verdicts confirmed on step spans (stragglers):
	// the steps from onset to the step whose verdict opened the fault
	// (1 = the onset step itself), independent of pipeline latency.
	StepsToConfirm []int
}

// Precision is (opened - false positives) / opened; 1 when none opened.
func (t TypeResult) Precision() float64 {
	if t.Opened == 0 {
		return 1
	}
	return float64(t.Opened-t.FalsePositives) / float64(t.Opened)
}

// Recall is detected / expected; 1 when none was expected.
func (t TypeResult) Recall() float64 {
	if t.Expected == 0 {
		return 1
	}
	return float64(t.Detected) / float64(t.Expected)
}

// score attributes each opened fault to the job it names and compares it
// with the job's expectations.
func score(opts Options, jobs []*job, onsets []time.Time, records []captured) *Report {
	rep := &Report{Seed: opts.Seed, StepPeriod: opts.StepPeriod}
	if len(jobs) > 0 {
		rep.Ranks = jobs[0].sc.Ranks()
	}
	byJob, byHost, byGPU := map[string]int{}, map[string]int{}, map[string]int{}
	for i, j := range jobs {
		byJob[j.id] = i
		for _, nd := range j.nodes {
			byHost[nd.host] = i
			for g := range nd.gpus {
				byGPU[j.gpuUUID(nd.index, g)] = i
			}
		}
	}
	// the first open record of each fault id
	first := map[string]captured{}
	var order []string
	for _, c := range records {
		if c.record.State != fault.StateOpen {
			continue
		}
		if _, seen := first[c.record.ID]; !seen {
			first[c.record.ID] = c
			order = append(order, c.record.ID)
		}
	}
	perJob := make([][]captured, len(jobs))
	for _, id := range order {
		c := first[id]
		i, ok := attribute(c.record, byJob, byHost, byGPU)
		if !ok {
			rep.Unattributed = append(rep.Unattributed, describe(c.record))
			continue
		}
		perJob[i] = append(perJob[i], c)
	}

	types := map[fault.Type]*TypeResult{}
	typ := func(t fault.Type) *TypeResult {
		if types[t] == nil {
			types[t] = &TypeResult{Type: t}
		}
		return types[t]
	}
	for i, j := range jobs {
		res := ScenarioResult{Name: j.sc.Name, HardNegative: j.sc.HardNegative, MaxDetectSteps: j.sc.MaxDetectSteps}
		for _, e := range j.sc.Expect {
			tr := typ(e.Type)
			tr.Expected++
			delay, confirm, steps := time.Duration(-1), 0, -1
			var firstSeen time.Duration
			for _, c := range perJob[i] {
				if j.matches(e, c.record) && (delay < 0 || c.at.Sub(onsets[i]) < delay) {
					delay = max(c.at.Sub(onsets[i]), 0)
					confirm = stepsToConfirm(c.record, onsets[i].Add(j.dataOffset()), opts.StepPeriod)
					steps = j.stepsUntil(c.at, onsets[i], opts.StepPeriod)
					firstSeen = c.record.FirstSeen.Sub(onsets[i].Add(j.dataOffset()))
				}
			}
			res.FirstSeenErrors = append(res.FirstSeenErrors, firstSeen)
			if b := j.sc.MaxFirstSeenError; delay >= 0 && b > 0 && (firstSeen > b || firstSeen < -b) {
				res.FirstSeenWrong = append(res.FirstSeenWrong, len(res.Found))
			}
			res.DetectSteps = append(res.DetectSteps, steps)
			if delay >= 0 {
				tr.Detected++
				tr.TimesToOpen = append(tr.TimesToOpen, delay)
				if confirm > 0 {
					tr.StepsToConfirm = append(tr.StepsToConfirm, confirm)
				}
			}
			res.Found = append(res.Found, delay)
			if steps >= 0 && j.sc.MaxDetectSteps > 0 && steps > j.sc.MaxDetectSteps {
				res.Late = append(res.Late, len(res.Found)-1)
			}
		}
		for _, c := range perJob[i] {
			tr := typ(c.record.Type)
			tr.Opened++
			if onsets[i].IsZero() { // a hard negative: no onset to time from
				res.Opened = append(res.Opened, fmt.Sprintf("%s (rule %s)", describe(c.record), c.record.Rule))
			} else {
				res.Opened = append(res.Opened, fmt.Sprintf("%s (rule %s, +%.1fs, first_seen %+.1fs)", describe(c.record), c.record.Rule,
					c.at.Sub(onsets[i]).Seconds(), c.record.FirstSeen.Sub(onsets[i]).Seconds()))
			}
			expected, allowed := false, false
			for _, e := range j.sc.Expect {
				expected = expected || j.matches(e, c.record)
			}
			for _, e := range j.sc.Allow {
				allowed = allowed || j.matches(e, c.record)
			}
			if !expected {
				res.OtherFaults++
			}
			over := !expected && j.sc.MaxOtherFaults != nil && res.OtherFaults > *j.sc.MaxOtherFaults
			if over {
				res.TooManyOthers = true
			}
			if (!expected && !allowed) || over {
				tr.FalsePositives++
				res.FalsePositives = append(res.FalsePositives, describe(c.record))
			}
		}
		rep.Scenarios = append(rep.Scenarios, res)
	}
	for _, u := range rep.Unattributed {
		t, _, _ := strings.Cut(u, " ")
		tr := typ(fault.Type(t))
		tr.Opened++
		tr.FalsePositives++
	}
	for _, tr := range types {
		rep.Types = append(rep.Types, *tr)
	}
	sort.Slice(rep.Types, func(a, b int) bool { return rep.Types[a].Type < rep.Types[b].Type })
	return rep
}

// stepsUntil counts the job's steps from its first injection's onset to
// at: the steps sent (drive's sentAt) from the onset step on by then, plus
// a step per period after the job's last one. Counting the job's own
// steps, not seconds, keeps the bound of max_detect_steps when a loaded
// machine runs the simulation behind its schedule. Without sentAt (a
// report built by hand) it is the periods from onset to at, rounded up.
func (j *job) stepsUntil(at, onset time.Time, period time.Duration) int {
	ins := j.sc.injections()
	if len(j.sentAt) == 0 || len(ins) == 0 {
		if period <= 0 {
			return 0
		}
		return int(math.Ceil(float64(at.Sub(onset)) / float64(period)))
	}
	from := ins[0].AtStep
	for _, in := range ins {
		from = min(from, in.AtStep)
	}
	n := 0
	for s := from; s < len(j.sentAt); s++ {
		if !j.sentAt[s].After(at) {
			n++
		}
	}
	if last := j.sentAt[len(j.sentAt)-1]; at.After(last) && period > 0 {
		n += int(at.Sub(last) / period)
	}
	return n
}

// dataOffset is the clock offset of the node of the job's first
// injection: the verdicts of its step spans carry that node's time.
func (j *job) dataOffset() time.Duration {
	if ins := j.sc.injections(); len(ins) > 0 {
		return j.clockOffset(ins[0].Node)
	}
	return j.clockOffset(0)
}

// stepsToConfirm reads the step of the straggler verdict that opened r from
// its evidence (the verdict span ends with its step); 0 without one.
func stepsToConfirm(r fault.Record, onset time.Time, period time.Duration) int {
	for _, ev := range r.Evidence {
		if ev.Signal == semconv.AttrStragglerVerdict && !ev.Time.IsZero() && period > 0 {
			// the verdict span ends with its step: step k after the onset ends
			// (k+1) periods after it
			return int(math.Round(float64(ev.Time.Sub(onset)) / float64(period)))
		}
	}
	return 0
}

func attribute(r fault.Record, byJob, byHost, byGPU map[string]int) (int, bool) {
	if i, ok := byJob[r.JobID]; ok && r.JobID != "" {
		return i, true
	}
	if i, ok := byHost[r.HostName]; ok && r.HostName != "" {
		return i, true
	}
	if i, ok := byGPU[r.GPUUUID]; ok && r.GPUUUID != "" {
		return i, true
	}
	// the entity key names a host or a job (node:h, ib_port:h/dev/port, rank:job/r)
	key := r.Entity.Key
	if k, _, ok := strings.Cut(key, "/"); ok {
		key = k
	}
	if i, ok := byHost[key]; ok {
		return i, true
	}
	if i, ok := byJob[key]; ok {
		return i, true
	}
	if i, ok := byGPU[key]; ok {
		return i, true
	}
	return 0, false
}

func describe(r fault.Record) string {
	return string(r.Type) + " " + r.Entity.String()
}

// matches reports whether record r satisfies expectation e within job j.
func (j *job) matches(e Expectation, r fault.Record) bool {
	if r.Type != e.Type {
		return false
	}
	if e.Entity != "any" && string(r.Entity.Kind) != e.Entity {
		return false
	}
	for _, sig := range e.Evidence {
		if !slices.ContainsFunc(r.Evidence, func(ev fault.Evidence) bool {
			return ev.Signal == sig || strings.HasPrefix(ev.Signal, sig+"{")
		}) {
			return false
		}
	}
	nodeOK := func(host string) bool { return e.Node == nil || host == j.hostName(*e.Node) }
	switch e.Entity {
	case "gpu":
		if e.Node == nil || e.GPU == nil {
			return true
		}
		return r.Entity.Key == j.gpuUUID(*e.Node, *e.GPU)
	case "rank":
		jobID, rankText, ok := strings.Cut(r.Entity.Key, "/")
		rank, err := strconv.Atoi(rankText)
		if !ok || err != nil || jobID != j.id {
			return false
		}
		n, g := rank/j.sc.GPUsPerNode, rank%j.sc.GPUsPerNode
		return (e.Node == nil || *e.Node == n) && (e.GPU == nil || *e.GPU == g)
	case "node":
		return nodeOK(r.Entity.Key)
	case "ib_port":
		parts := strings.Split(r.Entity.Key, "/")
		return len(parts) == 3 && nodeOK(parts[0]) &&
			(e.Device == "" || parts[1] == e.Device) && (e.Port == "" || parts[2] == e.Port)
	case "job":
		return r.Entity.Key == j.id
	}
	return true // any
}

// Write prints the report as Markdown.
func (rep *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "seed %d, %d ranks per job, step %s, %d scenarios, %.0f s\n\n",
		rep.Seed, rep.Ranks, rep.StepPeriod, len(rep.Scenarios), rep.Duration.Seconds())
	rep.writeTypes(w)
	for _, s := range rep.Scenarios {
		kind := "fault"
		if s.HardNegative {
			kind = "hard negative"
		}
		fmt.Fprintf(w, "- %s (%s): opened %v", s.Name, kind, s.Opened)
		if len(s.FalsePositives) > 0 {
			fmt.Fprintf(w, "; FALSE POSITIVES %v", s.FalsePositives)
		}
		for i, d := range s.Found {
			if d < 0 {
				fmt.Fprintf(w, "; MISSED expectation %d", i)
			}
		}
		if s.MaxDetectSteps > 0 {
			fmt.Fprintf(w, "; steps to detect %v (bound %d)", s.DetectSteps, s.MaxDetectSteps)
		}
		for _, i := range s.Late {
			fmt.Fprintf(w, "; LATE expectation %d (%d steps, +%.1fs)", i, s.DetectSteps[i], s.Found[i].Seconds())
		}
		if s.TooManyOthers {
			fmt.Fprintf(w, "; TOO MANY other faults (%d)", s.OtherFaults)
		}
		for _, i := range s.FirstSeenWrong {
			fmt.Fprintf(w, "; FIRST_SEEN of expectation %d off its onset by %+.1fs", i, s.FirstSeenErrors[i].Seconds())
		}
		if len(s.Warnings) > 0 {
			fmt.Fprintf(w, "; warnings %v", s.Warnings)
		}
		if len(s.WrongWarnings) > 0 {
			fmt.Fprintf(w, "; WRONG WARNINGS %v", s.WrongWarnings)
		}
		fmt.Fprintln(w)
	}
	if len(rep.Unattributed) > 0 {
		fmt.Fprintf(w, "- unattributed records: %v\n", rep.Unattributed)
	}
	if rep.BadRecords > 0 {
		fmt.Fprintf(w, "- %d fault records did not parse\n", rep.BadRecords)
	}
}

// Totals adds up the reports of several runs.
type Totals struct {
	runs          int
	seeds         []uint64
	types         map[fault.Type]*TypeResult
	hardNegatives int // faults opened on hard negatives
	bad           int
	late          int // expectations found after max_detect_steps
	firstSeen     int // expectations whose first_seen is beyond max_first_seen_error
	warnings      int // scenarios whose job warnings differ from theirs
}

// NewTotals returns empty totals.
func NewTotals() *Totals { return &Totals{types: map[fault.Type]*TypeResult{}} }

// Add counts one run.
func (t *Totals) Add(rep *Report) {
	t.runs++
	t.seeds = append(t.seeds, rep.Seed)
	t.bad += rep.BadRecords
	for _, tr := range rep.Types {
		acc := t.types[tr.Type]
		if acc == nil {
			acc = &TypeResult{Type: tr.Type}
			t.types[tr.Type] = acc
		}
		acc.Expected += tr.Expected
		acc.Detected += tr.Detected
		acc.Opened += tr.Opened
		acc.FalsePositives += tr.FalsePositives
		acc.TimesToOpen = append(acc.TimesToOpen, tr.TimesToOpen...)
		acc.StepsToConfirm = append(acc.StepsToConfirm, tr.StepsToConfirm...)
	}
	for _, s := range rep.Scenarios {
		if s.HardNegative {
			t.hardNegatives += len(s.Opened)
		}
		t.late += len(s.Late)
		t.firstSeen += len(s.FirstSeenWrong)
		if len(s.WrongWarnings) > 0 {
			t.warnings++
		}
	}
}

// Meets reports whether every type reaches target precision and recall,
// no hard negative opened a fault, every record parsed and no expectation
// was found later than its scenario's max_detect_steps (more faults than
// max_other_faults are false positives, in the precision), every
// first_seen within its scenario's max_first_seen_error and every job's
// warnings as its scenario says.
func (t *Totals) Meets(target float64) bool {
	for _, tr := range t.types {
		if tr.Precision() < target || tr.Recall() < target {
			return false
		}
	}
	return t.hardNegatives == 0 && t.bad == 0 && t.late == 0 && t.firstSeen == 0 && t.warnings == 0
}

// Write prints the totals as Markdown.
func (t *Totals) Write(w io.Writer) {
	rep := &Report{}
	for _, tr := range t.types {
		rep.Types = append(rep.Types, *tr)
	}
	sort.Slice(rep.Types, func(a, b int) bool { return rep.Types[a].Type < rep.Types[b].Type })
	fmt.Fprintf(w, "%d runs, seeds %v; faults opened on hard negatives: %d; found after max_detect_steps: %d; first_seen beyond max_first_seen_error: %d; scenarios with wrong warnings: %d\n\n",
		t.runs, t.seeds, t.hardNegatives, t.late, t.firstSeen, t.warnings)
	rep.StepPeriod = time.Second
	rep.writeTypes(w)
}

// writeTypes prints the per-type table.
func (rep *Report) writeTypes(w io.Writer) {
	fmt.Fprintln(w, "| fault type | expected | detected | recall | opened | false positives | precision | onset to open record: median, max | steps to confirm: max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, t := range rep.Types {
		ds := make([]float64, len(t.TimesToOpen))
		for i, d := range t.TimesToOpen {
			ds[i] = d.Seconds()
		}
		timing := "-"
		if len(ds) > 0 {
			timing = fmt.Sprintf("%.1f s, %.1f s", median(ds), slices.Max(ds))
		}
		confirm := "-"
		if len(t.StepsToConfirm) > 0 {
			confirm = strconv.Itoa(slices.Max(t.StepsToConfirm))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %d | %d | %.2f | %s | %s |\n",
			t.Type, t.Expected, t.Detected, t.Recall(), t.Opened, t.FalsePositives, t.Precision(), timing, confirm)
	}
	fmt.Fprintln(w)
}
