package rules

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

const (
	sigDBE   = "gpu.ecc.errors{gpu.ecc.type=dbe_volatile}"
	sigSBE   = "gpu.ecc.errors{gpu.ecc.type=sbe_volatile}"
	sigCRC   = "gpu.nvlink.errors{error.type=crc_flit}"
	sigTemp  = "hw.temperature{hw.sensor_location=gpu}"
	sigAR    = "nccl.collective.duration{nccl.collective=all_reduce}"
	sigStep  = "training.step.duration"
	sigTO    = "nccl.collectives.timed_out"
	sigSM    = "gpu.prof.active{gpu.prof.unit=sm}"
	sigUtil  = "hw.gpu.utilization{hw.gpu.task=general}"
	sigThrot = "gpu.clock.throttle{gpu.throttle.reason=hw_thermal_slowdown}"

	sigHealthCRC  = "gpu.health.nvlink_crc_errors"
	sigHealthTemp = "gpu.health.temperature"
)

var (
	t0      = time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	evalAt  = t0.Add(70 * time.Second)
	gpuG    = fault.Entity{Kind: fault.EntityGPU, Key: "GPU-5"}
	nodeN   = fault.Entity{Kind: fault.EntityNode, Key: "xl003"}
	rankR   = fault.Entity{Kind: fault.EntityRank, Key: "llama-70b/1045"}
	jobJ    = fault.Entity{Kind: fault.EntityJob, Key: "llama-70b"}
	portP   = fault.Entity{Kind: fault.EntityIBPort, Key: "xl003/mlx5_0/1"}
	normalT = obs{sigTemp, 70, "", 30}
)

// obs is one observation dt seconds after t0.
type obs struct {
	sig  string
	v    float64
	text string
	dt   int
}

func obsSeries(sig string, dt0, step int, vs ...float64) []obs {
	out := make([]obs, len(vs))
	for i, v := range vs {
		out[i] = obs{sig: sig, v: v, dt: dt0 + i*step}
	}
	return out
}

// allReduce is six samples at the baseline 1.0 then one at x.
func allReduce(x float64) []obs { return obsSeries(sigAR, 0, 10, 1, 1, 1, 1, 1, 1, x) }

func join(parts ...[]obs) []obs {
	var out []obs
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func text(sig, s string, dt int) []obs { return []obs{{sig: sig, text: s, dt: dt}} }

type ruleCase struct {
	entity    fault.Entity
	positive  []obs
	negatives [][]obs
}

// A minimal positive and a near-miss negative for every default rule.
func defaultCases() map[string]ruleCase {
	cases := map[string]ruleCase{
		"dbe_alone": {gpuG, obsSeries(sigDBE, 0, 10, 0, 1), [][]obs{obsSeries(sigDBE, 0, 10, 0, 0), obsSeries(sigDBE, 0, 10, 1)}},
		"dbe_with_oom_and_nccl_timeout": {nodeN,
			join(obsSeries(sigDBE, 0, 10, 0, 1), text("training.error", "oom", 20), obsSeries(sigTO, 0, 30, 0, 1)),
			[][]obs{join(obsSeries(sigDBE, 0, 10, 0, 1), obsSeries(sigTO, 0, 30, 0, 1)),
				join(obsSeries(sigDBE, 0, 10, 0, 1), text("training.error", "oom", 20)),
				// A script's claim, even with an NCCL timeout, is no DBE
				// (docs/security.md, "What a training script can say").
				join(text("training.error", "oom", 20), obsSeries(sigTO, 0, 30, 0, 1)),
				join(obsSeries(sigDBE, 0, 10, 0, 1), text("training.error", "dataloader", 20), obsSeries(sigTO, 0, 30, 0, 1))}},
		"nvlink_crc_rising_allreduce_slower": {gpuG,
			join(obsSeries(sigCRC, 0, 60, 0, 5), allReduce(2), []obs{normalT}),
			[][]obs{join(obsSeries(sigCRC, 0, 60, 0, 5), allReduce(2), []obs{{sigTemp, 90, "", 30}}),
				join(obsSeries(sigCRC, 0, 60, 0, 0), allReduce(2)),
				join(obsSeries(sigCRC, 0, 60, 0, 5), allReduce(1.1))}},
		"nvlink_crc_over_100_allreduce_3x": {gpuG,
			join(obsSeries(sigCRC, 0, 60, 0, 340), allReduce(3.4), []obs{normalT}),
			[][]obs{join(obsSeries(sigCRC, 0, 60, 0, 50), allReduce(3.4), []obs{normalT}),
				join(obsSeries(sigCRC, 0, 60, 0, 340), allReduce(2.5), []obs{normalT}),
				join(obsSeries(sigCRC, 0, 60, 0, 340), allReduce(3.4), []obs{{sigTemp, 92, "", 30}})}},
		"nccl_timeouts_from_nvlink": {nodeN,
			join(obsSeries(sigTO, 0, 60, 0, 3), obsSeries(sigCRC, 0, 60, 0, 5), obsSeries(sigStep, 0, 10, 1, 1, 1, 1, 1, 1, 2)),
			[][]obs{join(obsSeries(sigTO, 0, 60, 0, 1), obsSeries(sigCRC, 0, 60, 0, 5), obsSeries(sigStep, 0, 10, 1, 1, 1, 1, 1, 1, 2)),
				join(obsSeries(sigTO, 0, 60, 0, 3), obsSeries(sigCRC, 0, 60, 0, 5), obsSeries(sigStep, 0, 10, 1, 1, 1, 1, 1, 1, 1.05))}},
		"sm_low_util_high": {gpuG,
			join(obsSeries(sigSM, 0, 10, 0.3, 0.3, 0.3, 0.3), obsSeries(sigUtil, 0, 10, 0.95, 0.95, 0.95, 0.95)),
			[][]obs{join(obsSeries(sigSM, 0, 10, 0.9, 0.9, 0.9, 0.9), obsSeries(sigUtil, 0, 10, 0.95, 0.95, 0.95, 0.95)),
				join(obsSeries(sigSM, 0, 10, 0.3, 0.3), obsSeries(sigUtil, 0, 10, 0.95, 0.95))}},
		"straggler_compute": {rankR, text("straggler.verdict", "straggler.compute", 60),
			[][]obs{text("straggler.verdict", "straggler.link", 60), text("straggler.verdict", "none", 60)}},
		"straggler_link": {rankR, text("straggler.verdict", "straggler.link", 60),
			[][]obs{text("straggler.verdict", "straggler.compute", 60)}},
		// The job-level verdict of the step's root span, under the job.
		"job_slowdown": {jobJ, text("straggler.job_verdict", "job.slowdown", 60),
			[][]obs{text("straggler.job_verdict", "none", 60), text("straggler.verdict", "straggler.compute", 60)}},
		"straggler_with_nvlink_crc": {gpuG,
			join(text("straggler.verdict", "straggler.compute", 60), obsSeries(sigCRC, 0, 60, 0, 340), []obs{normalT}),
			[][]obs{join(text("straggler.verdict", "straggler.compute", 60), obsSeries(sigCRC, 0, 60, 0, 340), []obs{{sigTemp, 95, "", 30}}),
				join(text("straggler.verdict", "straggler.compute", 60), obsSeries(sigCRC, 0, 60, 0, 3)),
				join(text("straggler.verdict", "straggler.compute", 60), obsSeries(sigHealthCRC, 60, 1, 340), []obs{{sigHealthTemp, 91, "", 60}}),
				join(text("straggler.verdict", "flagged", 60), obsSeries(sigCRC, 0, 60, 0, 340))}},
		// (a straggler.link verdict fires it too: TestSpanHealthSignals)
		"sbe_rate_high":      {gpuG, obsSeries(sigSBE, 0, 60, 0, 80), [][]obs{obsSeries(sigSBE, 0, 60, 0, 10)}},
		"thermal_throttling": {gpuG, obsSeries(sigThrot, 30, 15, 1, 1, 1), [][]obs{obsSeries(sigThrot, 30, 15, 1, 0, 1), obsSeries(sigThrot, 30, 15, 1, 1)}},
		"gpu_unresponsive": {gpuG, obsSeries("gpu.unresponsive", 60, 1, 1),
			[][]obs{obsSeries("gpu.unresponsive", 60, 1, 0), text("event.name", "gpu.xid", 60)}},
		"row_remap_failure": {gpuG, obsSeries("gpu.memory.row_remap_failure", 60, 1, 1),
			[][]obs{obsSeries("gpu.memory.row_remap_failure", 60, 1, 0)}},
		"retired_pages_pending": {gpuG, obsSeries("gpu.memory.retired_pages.pending", 60, 1, 2),
			[][]obs{obsSeries("gpu.memory.retired_pages.pending", 60, 1, 0)}},
		"ib_link_down":     {portP, obsSeries("hw.errors{error.type=link_downed}", 0, 60, 0, 1), [][]obs{obsSeries("hw.errors{error.type=link_downed}", 0, 60, 3, 3)}},
		"ib_symbol_errors": {portP, obsSeries("hw.errors{error.type=symbol_error}", 0, 60, 0, 50), [][]obs{obsSeries("hw.errors{error.type=symbol_error}", 0, 60, 0, 5)}},
		"nccl_timeout":     {rankR, obsSeries(sigTO, 0, 60, 0, 1), [][]obs{obsSeries(sigTO, 0, 60, 0, 0)}},
		// Observed under the culprit rank (issue 20): the rank's fault.
		"nccl_hang": {rankR, join(text("nccl.finding", "hang", 60), text("nccl.hang.collective", "pg 21:EXPERT_MODEL_PARALLEL_GROUP seq 79 nccl:all_to_all", 60)),
			[][]obs{text("nccl.finding", "mismatch", 60), text("nccl.finding", "straggler", 60), text("nccl.hang.collective", "pg 21 seq 79", 60),
				// may name bystanders read mid-write: the job's fault only (issue 20)
				join(text("nccl.finding", "missing_ranks", 60), text("nccl.hang.collective", "pg 0 seq 17 all_reduce", 60))}},
		// Ranks missing from a collective, culprit not known: the job's hang.
		"nccl_hang_missing_ranks": {jobJ, join(text("nccl.finding", "missing_ranks", 60), text("nccl.hang.collective", "pg 0:default_pg seq 17 all_reduce; missing ranks 2,5", 60)),
			[][]obs{text("nccl.finding", "hang", 60), text("nccl.finding", "straggler", 60), text("nccl.hang.collective", "pg 0 seq 17", 60)}},
		// The flight recorder's straggler alone only where the rank sends
		// no step spans; with them, only when their verdict agrees.
		"nccl_straggler": {rankR, join(text("nccl.finding", "straggler", 60), obsSeries("nccl.finding.step_spans", 60, 1, 0)),
			[][]obs{join(text("nccl.finding", "straggler", 60), obsSeries("nccl.finding.step_spans", 60, 1, 1)),
				join(text("nccl.finding", "hang", 60), obsSeries("nccl.finding.step_spans", 60, 1, 0)),
				text("nccl.finding", "straggler", 60)}},
		"nccl_straggler_corroborated": {rankR, join(text("nccl.finding", "straggler", 60), text("straggler.verdict", "straggler.compute", 60)),
			[][]obs{text("nccl.finding", "straggler", 60), join(text("nccl.finding", "straggler", 60), text("straggler.verdict", "none", 60))}},
		"loss_nan":    {jobJ, obsSeries("training.loss", 0, 30, 2.1, math.NaN()), [][]obs{obsSeries("training.loss", 0, 30, 2.1, 2.0)}},
		"node_silent": {nodeN, obsSeries("node.heartbeat", -60, 1, 1), [][]obs{obsSeries("node.heartbeat", -60, 120, 1, 1)}},
		"node_repeated_faults": {nodeN,
			join(text("fault.opened", "gpu.xid.13 a1", -3600), text("fault.opened", "nccl.timeout b2", 0), text("fault.opened", "gpu.thermal c3", 60)),
			[][]obs{join(text("fault.opened", "gpu.xid.13 a1", -3600), text("fault.opened", "gpu.xid.13 a1", 0), text("fault.opened", "gpu.thermal c3", 60)),
				join(text("fault.opened", "gpu.xid.13 a1", -25*3600), text("fault.opened", "nccl.timeout b2", 0), text("fault.opened", "gpu.thermal c3", 60))}},
	}
	for name, code := range map[string]float64{"xid_13": 13, "xid_31": 31, "xid_45": 45, "xid_48": 48, "xid_62_63": 63,
		"xid_74": 74, "xid_79": 79, "xid_92": 92, "xid_94_95": 94, "xid_119_120": 120} {
		cases[name] = ruleCase{gpuG, obsSeries("gpu.xid", 60, 1, code), [][]obs{obsSeries("gpu.xid", 60, 1, code+1000)}}
	}
	addDCGMHealthCases(cases)
	return cases
}

func matchesFor(t *testing.T, rs []Rule, entity fault.Entity, in []obs) []Match {
	t.Helper()
	ev := NewEvaluator(rs, Limits{})
	for _, o := range in {
		ev.ObserveSample(entity, Sample{Signal: o.sig, Value: o.v, Text: o.text, At: t0.Add(time.Duration(o.dt) * time.Second)})
	}
	return ev.Evaluate(evalAt)
}

func findRule(ms []Match, name string) (Match, bool) {
	for _, m := range ms {
		if m.Rule == name {
			return m, true
		}
	}
	return Match{}, false
}

func TestEveryDefaultRuleFiresOnlyOnItsPattern(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	cases := defaultCases()
	for _, r := range rs {
		c, ok := cases[r.Name]
		if !assert.True(t, ok, "default rule %s has no test case", r.Name) {
			continue
		}
		t.Run(r.Name, func(t *testing.T) {
			m, fired := findRule(matchesFor(t, rs, c.entity, c.positive), r.Name)
			require.True(t, fired, "positive case")
			assert.Equal(t, r.FaultType, m.FaultType)
			assert.Equal(t, r.Severity, m.Severity)
			assert.Equal(t, c.entity, m.Entity)
			assert.NotEmpty(t, m.Evidence)
			assert.False(t, m.Since.After(m.At))
			require.NotEmpty(t, c.negatives)
			for i, neg := range c.negatives {
				_, fired := findRule(matchesFor(t, rs, c.entity, neg), r.Name)
				assert.False(t, fired, "negative case %d", i)
			}
		})
	}
	assert.Len(t, cases, len(rs), "a case for a rule that no longer exists")
}

// The brief's example: CRC > 100, all-reduce > 3x baseline, temperature
// normal -> nvlink.degraded, with the evidence that proves it.
func TestNVLinkDegradedEvidence(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ms := matchesFor(t, rs, gpuG, join(obsSeries(sigCRC, 0, 60, 0, 340), allReduce(3.4), []obs{normalT}))
	m, ok := findRule(ms, "nvlink_crc_over_100_allreduce_3x")
	require.True(t, ok)
	assert.Equal(t, fault.TypeNVLinkDegraded, m.FaultType)
	assert.Equal(t, fault.BlastNVLinkDomain, m.BlastRadius)
	assert.InDelta(t, 0.9, m.Confidence, 1e-9)
	require.Len(t, m.Evidence, 3)
	assert.Equal(t, sigCRC, m.Evidence[0].Signal)
	assert.InDelta(t, 340, m.Evidence[0].Value, 1e-9)
	assert.InDelta(t, 3.4, m.Evidence[1].Value, 1e-9, "ratio to the baseline")
	assert.InDelta(t, 70, m.Evidence[2].Value, 1e-9)
	_, trend := findRule(ms, "nvlink_crc_rising_allreduce_slower")
	assert.True(t, trend, "the weaker trend rule fires too; the correlator deduplicates by fault id")
	_, dbe := findRule(ms, "dbe_alone")
	assert.False(t, dbe)
}

func TestXIDMatchCarriesCodeAndTrace(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	tid := [16]byte{1, 2, 3}
	require.True(t, ev.ObserveSample(gpuG, Sample{Signal: "gpu.xid", Value: 95, At: t0, TraceID: tid}))
	ms := ev.Evaluate(t0.Add(time.Second))
	require.Len(t, ms, 1)
	assert.Equal(t, "xid_94_95", ms[0].Rule)
	assert.Equal(t, 95, ms[0].XID)
	assert.Equal(t, fault.TypeGPUXID, ms[0].FaultType)
	assert.Equal(t, [16]byte(ms[0].Evidence[0].TraceID), tid)
}

func TestWindowExpiry(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{ForgetAfter: 30 * time.Minute})
	ev.Observe(gpuG, sigDBE, 0, t0)
	ev.Observe(gpuG, sigDBE, 1, t0.Add(10*time.Second))
	_, ok := findRule(ev.Evaluate(t0.Add(20*time.Second)), "dbe_alone")
	assert.True(t, ok)
	_, ok = findRule(ev.Evaluate(t0.Add(5*time.Minute+5*time.Second)), "dbe_alone")
	assert.False(t, ok, "the 0 sample left the 5m window: no growth seen any more")
	assert.Equal(t, 1, ev.Entities())
	ev.Evaluate(t0.Add(31 * time.Minute))
	assert.Equal(t, 0, ev.Entities(), "silent beyond ForgetAfter: forgotten")

	// node.silent fires while the node is remembered and stops once forgotten.
	ev.Observe(nodeN, "node.heartbeat", 1, t0)
	_, ok = findRule(ev.Evaluate(t0.Add(time.Minute)), "node_silent")
	assert.False(t, ok)
	_, ok = findRule(ev.Evaluate(t0.Add(3*time.Minute)), "node_silent")
	assert.True(t, ok)
	_, ok = findRule(ev.Evaluate(t0.Add(31*time.Minute)), "node_silent")
	assert.True(t, ok, "nodes are kept for the longest node rule window (24h)")
	assert.Equal(t, 24*time.Hour, ev.ForgetAfter(fault.EntityNode))
	assert.Equal(t, 30*time.Minute, ev.ForgetAfter(fault.EntityGPU))
	_, ok = findRule(ev.Evaluate(t0.Add(24*time.Hour+time.Minute)), "node_silent")
	assert.False(t, ok)
	assert.Equal(t, 0, ev.Entities())
}

func TestBounds(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{MaxEntities: 2, MaxSamplesPerSeries: 4})
	assert.False(t, ev.Observe(gpuG, "no.rule.reads.this", 1, t0), "unused signals are not stored")
	assert.Equal(t, 0, ev.Entities())
	for i := 0; i < 3; i++ {
		e := fault.Entity{Kind: fault.EntityGPU, Key: string(rune('a' + i))}
		ok := ev.Observe(e, sigDBE, 0, t0)
		assert.Equal(t, i < 2, ok)
	}
	assert.Equal(t, 2, ev.Entities())
	assert.Equal(t, uint64(1), ev.Dropped())

	a := fault.Entity{Kind: fault.EntityGPU, Key: "a"}
	for i := 1; i <= 100; i++ {
		ev.Observe(a, sigDBE, float64(i), t0.Add(time.Duration(i)*time.Second))
	}
	assert.Len(t, ev.entities[a].get(ev.ids[sigDBE]).points, 4)
	n := 0
	for _, sr := range ev.entities[a].series {
		if sr != nil {
			n++
		}
	}
	assert.Equal(t, 1, n)
}

func TestOutOfOrderAndCounterReset(t *testing.T) {
	one := 0.0
	c := Condition{Signal: "c", Agg: AggDelta, Op: OpGT, Value: &one}
	r := Rule{Name: "r", FaultType: fault.TypeGPUMemoryDBE, Severity: fault.SeverityP1, Action: fault.ActionNone,
		BlastRadius: fault.BlastGPU, Confidence: 1, Entity: fault.EntityGPU, Window: time.Minute, All: []Condition{c}}
	ev := NewEvaluator([]Rule{r}, Limits{})
	// Arrives 2, 0, 5 by time 20 s, 0 s, 10 s: in time order 0, 5, 2 (a reset).
	ev.Observe(gpuG, "c", 2, t0.Add(20*time.Second))
	ev.Observe(gpuG, "c", 0, t0)
	ev.Observe(gpuG, "c", 5, t0.Add(10*time.Second))
	ms := ev.Evaluate(t0.Add(30 * time.Second))
	require.Len(t, ms, 1)
	assert.InDelta(t, 7, ms[0].Evidence[0].Value, 1e-9, "5 up, then a reset and 2 more")
	assert.Equal(t, t0.Add(20*time.Second), ms[0].At)
}

func TestAnyAndPassIfMissing(t *testing.T) {
	v := 1.0
	r := Rule{Name: "r", FaultType: fault.TypeGPUThermal, Severity: fault.SeverityP2, Action: fault.ActionNone,
		BlastRadius: fault.BlastGPU, Confidence: 1, Entity: fault.EntityGPU, Window: time.Minute,
		All: []Condition{{Signal: "temp", Op: OpLT, Value: &v, PassIfMissing: true}},
		Any: []Condition{{Signal: "a", Op: OpGE, Value: &v}, {Signal: "b", Op: OpGE, Value: &v}}}
	ev := NewEvaluator([]Rule{r}, Limits{})
	ev.Observe(gpuG, "a", 0, t0)
	assert.Empty(t, ev.Evaluate(t0), "no any condition holds")
	ev.Observe(gpuG, "b", 1, t0)
	ms := ev.Evaluate(t0)
	require.Len(t, ms, 1, "temp missing passes, b holds")
	assert.Len(t, ms[0].Evidence, 1)

	only := Rule{Name: "o", FaultType: fault.TypeGPUThermal, Severity: fault.SeverityP2, Action: fault.ActionNone,
		BlastRadius: fault.BlastGPU, Confidence: 1, Entity: fault.EntityGPU, Window: time.Minute,
		All: []Condition{{Signal: "temp", Op: OpLT, Value: &v, PassIfMissing: true}}}
	ev = NewEvaluator([]Rule{only, r}, Limits{})
	ev.Observe(gpuG, "b", 1, t0)
	ms = ev.Evaluate(t0)
	require.Len(t, ms, 1, "a rule with nothing observed never fires")
	assert.Equal(t, "r", ms[0].Rule)
}

// last_samples: the thermal rule fires on the third throttled scrape, even
// with unthrottled samples earlier in the window, and needs three of them.
func TestLastSamples(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	cases := []struct {
		name  string
		in    []obs
		fires bool
	}{
		{"three throttled after a free one", obsSeries(sigThrot, 0, 15, 0, 0, 1, 1, 1), true},
		{"free again in the newest sample", obsSeries(sigThrot, 0, 15, 1, 1, 1, 0), false},
		{"only two samples", obsSeries(sigThrot, 40, 15, 1, 1), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, fired := findRule(matchesFor(t, rs, gpuG, c.in), "thermal_throttling")
			require.Equal(t, c.fires, fired)
			if fired {
				require.Len(t, m.Evidence, 1)
				assert.InDelta(t, 1, m.Evidence[0].Value, 0)
				assert.Equal(t, 2*time.Minute, m.Window)
			}
		})
	}
}

func TestDistinctListsEachValueOnce(t *testing.T) {
	two := 2.0
	r := Rule{Name: "d", FaultType: fault.TypeNodeRepeatedFaults, Severity: fault.SeverityP2, Action: fault.ActionDrain,
		BlastRadius: fault.BlastNode, Confidence: 1, Entity: fault.EntityNode, Window: time.Hour,
		All: []Condition{{Signal: "v", Agg: AggDistinct, Op: OpGE, Value: &two}}}
	ev := NewEvaluator([]Rule{r}, Limits{})
	ev.Observe(nodeN, "v", math.NaN(), t0)
	ev.Observe(nodeN, "v", math.NaN(), t0.Add(time.Second))
	assert.Empty(t, ev.Evaluate(t0.Add(2*time.Second)), "two NaNs are one value")
	ev.Observe(nodeN, "v", 3, t0.Add(3*time.Second))
	ev.ObserveSample(nodeN, Sample{Signal: "v", Text: "x", At: t0.Add(4 * time.Second)})
	ms := ev.Evaluate(t0.Add(5 * time.Second))
	require.Len(t, ms, 1)
	require.Len(t, ms[0].Evidence, 3)
	assert.True(t, math.IsNaN(ms[0].Evidence[0].Value))
	assert.Equal(t, t0.Add(time.Second), ms[0].Evidence[0].Time, "the latest sample of each value")
	assert.InDelta(t, 3, ms[0].Evidence[1].Value, 0)
	assert.Equal(t, "x", ms[0].Evidence[2].Text)
	assert.Equal(t, t0.Add(time.Second), ms[0].Since)
}

// The signals a rank's train.step span carries reach the same faults as the
// metrics and logs they summarise.
func TestSpanHealthSignals(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	_, ok := findRule(matchesFor(t, rs, gpuG, obsSeries("gpu.health.ecc_dbe_errors", 50, 10, 0, 1)), "dbe_alone")
	assert.True(t, ok)
	_, ok = findRule(matchesFor(t, rs, gpuG, obsSeries("gpu.health.ecc_dbe_errors", 50, 10, 0, 0)), "dbe_alone")
	assert.False(t, ok)
	_, ok = findRule(matchesFor(t, rs, rankR, obsSeries("nccl.collective.timed_out", 60, 1, 1)), "nccl_timeout")
	assert.True(t, ok)
	m, ok := findRule(matchesFor(t, rs, gpuG, join(text("straggler.verdict", "straggler.compute", 60),
		obsSeries(sigHealthCRC, 60, 1, 340), []obs{{sigHealthTemp, 70, "", 60}})), "straggler_with_nvlink_crc")
	require.True(t, ok)
	assert.Equal(t, fault.TypeNVLinkDegraded, m.FaultType)
	assert.Len(t, m.Evidence, 3, "verdict, span temperature, CRC; the missing DCGM temperature passes without evidence")
	_, ok = findRule(matchesFor(t, rs, gpuG, join(text("straggler.verdict", "straggler.link", 60), obsSeries(sigCRC, 0, 60, 0, 160))),
		"straggler_with_nvlink_crc")
	assert.True(t, ok, "a slow link whose GPU's CRC count grows")
}

// A match condition's evidence is the earliest matching sample (the onset
// stays put as more arrive); the match's At is the latest.
func TestMatchEvidenceIsTheOnset(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	ev.ObserveSample(gpuG, Sample{Signal: "gpu.xid", Value: 48, At: t0, SpanID: [8]byte{1}})
	ev.ObserveSample(gpuG, Sample{Signal: "gpu.xid", Value: 13, At: t0.Add(time.Second)})
	ev.ObserveSample(gpuG, Sample{Signal: "gpu.xid", Value: 48, At: t0.Add(2 * time.Second), SpanID: [8]byte{2}})
	m, ok := findRule(ev.Evaluate(t0.Add(3*time.Second)), "xid_48")
	require.True(t, ok)
	require.Len(t, m.Evidence, 1)
	assert.Equal(t, [8]byte{1}, [8]byte(m.Evidence[0].SpanID))
	assert.Equal(t, t0, m.Since)
	assert.Equal(t, t0.Add(2*time.Second), m.At)
}

// EvaluateChanged evaluates only the entities that received samples since
// their last evaluation, with the matches Evaluate gives for them.
func TestEvaluateChangedOnlyTheChangedEntities(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	a, b := fault.Entity{Kind: fault.EntityGPU, Key: "GPU-a"}, fault.Entity{Kind: fault.EntityGPU, Key: "GPU-b"}
	ev.Observe(a, "gpu.xid", 79, t0)
	ev.Observe(b, "gpu.xid", 48, t0)
	got := ev.EvaluateChanged(evalAt)
	require.Len(t, got, 2)
	assert.Equal(t, ev.Evaluate(evalAt), got)

	assert.Empty(t, ev.EvaluateChanged(evalAt), "nothing new since")
	ev.Observe(b, "gpu.xid", 48, t0.Add(time.Second))
	got = ev.EvaluateChanged(evalAt)
	require.Len(t, got, 1)
	assert.Equal(t, b, got[0].Entity)

	// Evaluate evaluates every entity, and so clears what changed.
	ev.Observe(a, "gpu.xid", 79, t0.Add(time.Second))
	require.Len(t, ev.Evaluate(evalAt), 2)
	assert.Empty(t, ev.EvaluateChanged(evalAt))
}

// Samples placed at their arrival (Sample.DataTime set): the window holds
// them by arrival, the evidence keeps the data time as Time and the
// arrival as ObservedAt, Since and At are data times, the evidence of a
// match condition is the sample with the earliest data time (the second to
// arrive here), and Onset is the earliest onset any matching sample
// reports.
func TestArrivalPlacedSamplesKeepDataTimeAndOnset(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	old := t0.Add(-10 * time.Minute) // data 10 minutes older than evalAt's window
	verdict := func(arrive, data, onset time.Duration) Sample {
		s := Sample{Signal: "straggler.verdict", Text: "straggler.compute", At: t0.Add(arrive), DataTime: old.Add(data)}
		if onset != 0 {
			s.Onset = old.Add(onset)
		}
		return s
	}
	require.True(t, ev.ObserveSample(rankR, verdict(60*time.Second, 9*time.Second, -20*time.Second)))
	require.True(t, ev.ObserveSample(rankR, verdict(61*time.Second, 6*time.Second, -30*time.Second)))
	require.True(t, ev.ObserveSample(rankR, verdict(62*time.Second, 12*time.Second, 0)))
	m, ok := findRule(ev.Evaluate(evalAt), "straggler_compute")
	require.True(t, ok, "10-minute-old data placed at its arrival is in the window")
	require.Len(t, m.Evidence, 1)
	e := m.Evidence[0]
	assert.True(t, e.Time.Equal(old.Add(6*time.Second)), "earliest data time: %v", e.Time)
	assert.True(t, e.ObservedAt.Equal(t0.Add(61*time.Second)), "its arrival: %v", e.ObservedAt)
	assert.True(t, m.Since.Equal(old.Add(6*time.Second)))
	assert.True(t, m.At.Equal(old.Add(12*time.Second)), "latest data time: %v", m.At)
	assert.True(t, m.Onset.Equal(old.Add(-30*time.Second)), "earliest onset: %v", m.Onset)

	// Placed at the data time (no DataTime): the same data is outside the
	// window, and evidence of samples placed so has no ObservedAt.
	ev = NewEvaluator(rs, Limits{})
	ev.ObserveSample(rankR, Sample{Signal: "straggler.verdict", Text: "straggler.compute", At: old})
	_, ok = findRule(ev.Evaluate(evalAt), "straggler_compute")
	assert.False(t, ok)
	ev.ObserveSample(gpuG, Sample{Signal: "gpu.xid", Value: 48, At: t0.Add(60 * time.Second)})
	m, ok = findRule(ev.Evaluate(evalAt), "xid_48")
	require.True(t, ok)
	assert.True(t, m.Evidence[0].ObservedAt.IsZero())
	assert.True(t, m.Onset.IsZero(), "no sample reported an onset")
}
