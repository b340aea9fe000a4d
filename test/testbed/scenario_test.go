package testbed

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestScenariosLoad(t *testing.T) {
	scs, err := Scenarios()
	require.NoError(t, err)
	kinds := map[string]bool{}
	negatives := 0
	for _, sc := range scs {
		if sc.Name == "two_rank_job" {
			assert.Equal(t, 2, sc.Ranks(), sc.Name) // issue 30: a tiny job
		} else {
			assert.Equal(t, 64, sc.Ranks(), sc.Name)
		}
		if sc.HardNegative {
			negatives++
			continue
		}
		for _, in := range sc.injections() {
			kinds[in.Kind] = true
		}
	}
	// every fault kind of the issue and the seven hard negatives (issue 20
	// added the unlabelled pipeline, issue 30 another and a half-slow job
	// with spikes)
	for _, k := range []string{InjectComputeStraggler, InjectSlowLink, InjectNVLinkDegradation, InjectDBE,
		InjectThermal, InjectIBFlap, InjectHang, InjectLossNaN, InjectSilentNode} {
		assert.True(t, kinds[k], k)
	}
	assert.Equal(t, 7, negatives)
}

func TestScenariosInvalid(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown kind":      "defaults: {nodes: 1, gpus_per_node: 8, steps: 10}\nscenarios: [{name: a, inject: {kind: meteor, at_step: 2}, expect: [{type: gpu.thermal, entity: gpu}]}]",
		"onset after end":   "defaults: {nodes: 1, gpus_per_node: 8, steps: 10}\nscenarios: [{name: a, inject: {kind: thermal, at_step: 20}, expect: [{type: gpu.thermal, entity: gpu}]}]",
		"negative expects":  "defaults: {nodes: 1, gpus_per_node: 8, steps: 10}\nscenarios: [{name: a, hard_negative: true, expect: [{type: gpu.thermal, entity: gpu}]}]",
		"unknown type":      "defaults: {nodes: 1, gpus_per_node: 8, steps: 10}\nscenarios: [{name: a, inject: {kind: thermal, at_step: 2}, expect: [{type: gpu.melted, entity: gpu}]}]",
		"node out of range": "defaults: {nodes: 1, gpus_per_node: 8, steps: 10}\nscenarios: [{name: a, inject: {kind: thermal, at_step: 2, node: 3}, expect: [{type: gpu.thermal, entity: gpu}]}]",
	} {
		_, err := parseScenarios([]byte(doc))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), `scenario 0 ("a")`, name)
	}
}

func ptr(i int) *int { return &i }

// TestScore checks the attribution and matching rules on hand-made records.
func TestScore(t *testing.T) {
	sc := Scenario{Name: "thermal", Nodes: 2, GPUsPerNode: 8, Steps: 10,
		Inject: &Injection{Kind: InjectThermal, AtStep: 3, Node: 1, GPU: 2},
		Expect: []Expectation{{Type: fault.TypeGPUThermal, Entity: "gpu", Node: ptr(1), GPU: ptr(2)}},
		Allow:  []Expectation{{Type: fault.TypeStragglerCompute, Entity: "rank", Node: ptr(1), GPU: ptr(2)}}}
	neg := Scenario{Name: "healthy", HardNegative: true, Nodes: 2, GPUsPerNode: 8, Steps: 10}
	jobs := []*job{newJob(sc, "1", 1), newJob(neg, "1", 2)}
	onset := time.Unix(1000, 0)
	rec := func(id string, typ fault.Type, kind fault.EntityKind, key string, at time.Duration) captured {
		return captured{record: fault.Record{ID: id, Type: typ, State: fault.StateOpen, Entity: fault.Entity{Kind: kind, Key: key}}, at: onset.Add(at)}
	}
	records := []captured{
		rec("a", fault.TypeGPUThermal, fault.EntityGPU, jobs[0].gpuUUID(1, 2), 4*time.Second),
		rec("a", fault.TypeGPUThermal, fault.EntityGPU, jobs[0].gpuUUID(1, 2), 9*time.Second),   // same id again
		rec("b", fault.TypeStragglerCompute, fault.EntityRank, jobs[0].id+"/10", 6*time.Second), // allowed: rank 10 is node 1 GPU 2
		rec("c", fault.TypeStragglerCompute, fault.EntityRank, jobs[0].id+"/3", 6*time.Second),  // not allowed
		rec("d", fault.TypeGPUThermal, fault.EntityGPU, jobs[1].gpuUUID(0, 0), time.Second),     // on the hard negative
		rec("e", fault.TypeNodeSilent, fault.EntityNode, "elsewhere", time.Second),              // nobody's
	}
	records[2].record.Evidence = []fault.Evidence{{Signal: "straggler.verdict", Text: "straggler.compute", Time: onset.Add(2500 * time.Millisecond)}}
	rep := score(Options{StepPeriod: time.Second}, jobs, []time.Time{onset, {}}, records)
	byType := map[fault.Type]TypeResult{}
	for _, tr := range rep.Types {
		byType[tr.Type] = tr
	}
	th := byType[fault.TypeGPUThermal]
	assert.Equal(t, 1, th.Detected)
	assert.Equal(t, []time.Duration{4 * time.Second}, th.TimesToOpen)
	assert.Equal(t, 2, th.Opened)
	assert.Equal(t, 1, th.FalsePositives)
	assert.InDelta(t, 0.5, th.Precision(), 1e-9)
	sc2 := byType[fault.TypeStragglerCompute]
	assert.Empty(t, sc2.StepsToConfirm, "an allowed record is not a detection")
	assert.Equal(t, 2, sc2.Opened)
	assert.Equal(t, 1, sc2.FalsePositives)
	assert.Equal(t, 1, byType[fault.TypeNodeSilent].FalsePositives)
	assert.Len(t, rep.Unattributed, 1)
	require.Len(t, rep.Scenarios, 2)
	assert.Len(t, rep.Scenarios[1].FalsePositives, 1)

	var b strings.Builder
	rep.Write(&b)
	assert.Contains(t, b.String(), "| gpu.thermal | 1 | 1 | 1.00 | 2 | 1 | 0.50 | 4.0 s, 4.0 s | - |")
	total := NewTotals()
	total.Add(rep)
	assert.False(t, total.Meets(0.95))
}

func TestStepsToConfirm(t *testing.T) {
	onset := time.Unix(1000, 0)
	r := fault.Record{Evidence: []fault.Evidence{
		{Signal: "gpu.nvlink.errors{error.type=crc_flit}", Value: 300, Time: onset.Add(time.Second)},
		{Signal: "straggler.verdict", Text: "straggler.compute", Time: onset.Add(3100 * time.Millisecond)},
	}}
	assert.Equal(t, 3, stepsToConfirm(r, onset, time.Second))
	assert.Equal(t, 0, stepsToConfirm(fault.Record{}, onset, time.Second))
}

// TestInjects checks a job with two injections (cmd/demo's scenario): both
// act on their own GPU from their own step, and an injects entry is
// validated like inject.
func TestInjects(t *testing.T) {
	doc := `defaults: {nodes: 2, gpus_per_node: 8, steps: 10, jitter: 0.01}
scenarios:
  - name: two
    injects:
      - {kind: compute_straggler, at_step: 3, node: 1, gpu: 2, factor: 2.0}
      - {kind: nvlink_degradation, at_step: 5, node: 0, gpu: 6, crc_per_scrape: 80, factor: 3.0}
    expect: [{type: straggler.compute, entity: rank}]`
	scs, err := ParseScenarios([]byte(doc))
	require.NoError(t, err)
	require.Len(t, scs, 1)
	j := newJob(scs[0], "1", 7)
	rankStraggler, rankNVLink := j.rankOf(1, 2), j.rankOf(0, 6)

	before := j.simulateStep(2)
	assert.Less(t, before[rankStraggler].compute(), 1200*time.Millisecond, "no straggler before its step")
	mid := j.simulateStep(3)
	assert.Greater(t, mid[rankStraggler].compute(), 1500*time.Millisecond, "straggler from its step")
	assert.Less(t, mid[rankNVLink].collectives[0]-mid[rankNVLink+1].collectives[0], 20*time.Millisecond, "no slow link before its step")
	after := j.simulateStep(5)
	assert.Greater(t, after[rankNVLink].collectives[0]-after[rankNVLink+1].collectives[0], 40*time.Millisecond, "slow link from its step")

	for step := 0; step < 6; step++ {
		j.nodes[0].tick(step)
	}
	assert.Positive(t, j.nodes[0].gpus[6].nvlinkCRC)
	assert.Zero(t, j.nodes[0].gpus[5].nvlinkCRC)

	bad := strings.Replace(doc, "at_step: 5", "at_step: 50", 1)
	_, err = ParseScenarios([]byte(bad))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "injects[1].at_step")
}
