package testbed

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Issue 30: the committed clock scenarios bound first_seen and expect one
// clock warning; every other scenario expects none of either kind.
func TestClockScenarios(t *testing.T) {
	scs, err := Scenarios()
	require.NoError(t, err)
	byName := map[string]Scenario{}
	for _, sc := range scs {
		byName[sc.Name] = sc
	}
	sc := byName["clock_skew_90s"]
	assert.Equal(t, []time.Duration{0, 90 * time.Second}, sc.ClockSkew)
	assert.Equal(t, 3*time.Second, sc.MaxFirstSeenError)
	assert.Equal(t, map[string]int{"clock_skew": 1}, sc.Warnings)
	j := newJob(sc, "1", 1)
	assert.Equal(t, 90*time.Second, j.clockOffset(sc.Inject.Node), "the straggler's node is 90 s ahead")
	assert.Equal(t, time.Duration(0), j.clockOffset(0), "the job's earliest clock")
	assert.Equal(t, map[string]int{"clock_skew": 1}, byName["clock_skew_2m"].Warnings)
}

func TestScenarioWarningsInvalid(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"unknown kind":   {"warnings: {clock: 1}", `warnings: unknown kind "clock" (clock_skew, no_comm_split)`},
		"negative count": {"warnings: {clock_skew: -1}", "warnings: clock_skew: negative count -1"},
		"negative bound": {"max_first_seen_error: -1s", "max_first_seen_error: negative"},
	} {
		doc := "defaults: {nodes: 1, gpus_per_node: 8, steps: 10}\nscenarios: [{name: a, " + c.doc +
			", inject: {kind: thermal, at_step: 2}, expect: [{type: gpu.thermal, entity: gpu}]}]"
		_, err := parseScenarios([]byte(doc))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
}

// first_seen is measured against the onset on the injected node's clock.
func TestScoreFirstSeen(t *testing.T) {
	sc := Scenario{Name: "skew", Nodes: 2, GPUsPerNode: 8, Steps: 20, ClockSkew: []time.Duration{0, 90 * time.Second},
		MaxFirstSeenError: 3 * time.Second,
		Inject:            &Injection{Kind: InjectComputeStraggler, AtStep: 5, Node: 1, GPU: 2},
		Expect:            []Expectation{{Type: fault.TypeStragglerCompute, Entity: "rank", Node: ptr(1), GPU: ptr(2)}}}
	j := newJob(sc, "1", 1)
	onset := time.Unix(1000, 0)
	scoreWith := func(firstSeen time.Time) ScenarioResult {
		r := fault.Record{ID: "a", Type: fault.TypeStragglerCompute, State: fault.StateOpen,
			Entity: fault.Entity{Kind: fault.EntityRank, Key: j.id + "/10"}, FirstSeen: firstSeen}
		rep := score(Options{StepPeriod: time.Second}, []*job{j}, []time.Time{onset}, []captured{{record: r, at: onset.Add(4 * time.Second)}})
		require.Len(t, rep.Scenarios, 1)
		return rep.Scenarios[0]
	}
	s := scoreWith(onset.Add(90*time.Second + time.Second)) // its own clock, one step late
	assert.Equal(t, []time.Duration{time.Second}, s.FirstSeenErrors)
	assert.Empty(t, s.FirstSeenWrong)

	s = scoreWith(onset) // the job's earliest clock: 90 s early
	assert.Equal(t, []time.Duration{-90 * time.Second}, s.FirstSeenErrors)
	assert.Equal(t, []int{0}, s.FirstSeenWrong)
	total := NewTotals()
	total.Add(&Report{Scenarios: []ScenarioResult{s}})
	assert.False(t, total.Meets(0.95), "a wrong first_seen fails the suite")
}

func TestWarningsByJobAndKind(t *testing.T) {
	w := newWarningLog()
	log := zap.New(w.core)
	log.Warn("stragglerprocessor: the job's node clocks disagree; ...", zap.String("training.job.id", "sim-a"))
	log.Warn("stragglerprocessor: the job's step records cannot show a straggler: ...", zap.String("training.job.id", "sim-b"))
	log.Warn("stragglerprocessor: the job's step records cannot show a straggler: ...", zap.String("training.job.id", "sim-b"))
	log.Info("stragglerprocessor: the job's node clocks disagree", zap.String("training.job.id", "sim-c")) // not a warning
	log.Warn("faultcorrelator: node clocks disagree", zap.String("training.job.id", "sim-c"))              // another component
	log.Warn("stragglerprocessor: the job's node clocks disagree")                                         // no job
	got := w.byJob()
	assert.Equal(t, map[string]map[string]int{"sim-a": {"clock_skew": 1}, "sim-b": {"no_comm_split": 2}}, got)

	jobs := []*job{
		newJob(Scenario{Name: "a", Nodes: 1, GPUsPerNode: 8, Steps: 10, Warnings: map[string]int{"clock_skew": 1}}, "1", 1),
		newJob(Scenario{Name: "b", Nodes: 1, GPUsPerNode: 8, Steps: 10}, "1", 2),
		newJob(Scenario{Name: "c", Nodes: 1, GPUsPerNode: 8, Steps: 10, Warnings: map[string]int{"clock_skew": 1}}, "1", 3),
	}
	jobs[0].id, jobs[1].id, jobs[2].id = "sim-a", "sim-b", "sim-c"
	rep := &Report{Scenarios: make([]ScenarioResult, 3)}
	checkWarnings(rep, jobs, got)
	assert.Empty(t, rep.Scenarios[0].WrongWarnings)
	assert.Equal(t, map[string]int{"clock_skew": 1}, rep.Scenarios[0].Warnings)
	assert.Equal(t, []string{"no_comm_split: 2, want 0"}, rep.Scenarios[1].WrongWarnings, "a warning the scenario does not expect")
	assert.Equal(t, []string{"clock_skew: 0, want 1"}, rep.Scenarios[2].WrongWarnings, "a warning that never came")
	total := NewTotals()
	total.Add(rep)
	assert.False(t, total.Meets(0.95))
}
