package rules

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDefaultsCoverDomainRulesAndXIDTable(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	byName := map[string]Rule{}
	for _, r := range rs {
		require.NoError(t, r.Validate())
		byName[r.Name] = r
	}
	// DOMAIN.md §5, one name per rule there.
	for _, name := range []string{"dbe_alone", "dbe_with_oom_and_nccl_timeout", "nvlink_crc_rising_allreduce_slower",
		"nvlink_crc_over_100_allreduce_3x", "nccl_timeouts_from_nvlink", "sm_low_util_high",
		"straggler_compute", "straggler_link", "straggler_with_nvlink_crc"} {
		assert.Contains(t, byName, name)
	}
	// DOMAIN.md §3: one rule per row, with the row's codes.
	xidRows := map[string][]any{"xid_13": {13}, "xid_31": {31}, "xid_45": {45}, "xid_48": {48}, "xid_62_63": {62, 63},
		"xid_74": {74}, "xid_79": {79}, "xid_92": {92}, "xid_94_95": {94, 95}, "xid_119_120": {119, 120}}
	for name, codes := range xidRows {
		r, ok := byName[name]
		if assert.True(t, ok, name) {
			assert.Equal(t, codes, r.All[0].In, name)
		}
	}
	assert.Equal(t, fault.SeverityP1, byName["xid_48"].Severity, "critical rows page")
	assert.Equal(t, fault.TypeGPUMemoryDBE, byName["xid_48"].FaultType)
	assert.Equal(t, fault.SeverityP4, byName["xid_119_120"].Severity, "info rows are recorded only")

	// Every fault type of the issue has at least one default rule.
	covered := map[fault.Type]bool{}
	for _, r := range rs {
		covered[r.FaultType] = true
	}
	for _, ty := range fault.Types() {
		assert.True(t, covered[ty], "no default rule for %s", ty)
	}
}

func TestLoadOverridesAddsAndDisables(t *testing.T) {
	defaults, err := Default()
	require.NoError(t, err)
	user := `
rules:
  - name: dbe_alone            # replaced whole
    fault_type: gpu.memory.dbe
    severity: P2
    action: drain
    blast_radius: node
    confidence: 0.5
    entity: gpu
    window: 90s
    all: [{signal: "gpu.ecc.errors{gpu.ecc.type=dbe_volatile}", agg: delta, op: ">=", value: 2}]
  - name: xid_31
    disabled: true
  - name: pcie_replays          # added
    fault_type: gpu.xid
    severity: P3
    action: none
    blast_radius: gpu
    confidence: 0.5
    entity: gpu
    window: 1m
    all: [{signal: gpu.pcie.replays, agg: rate, op: ">", value: 10}]
`
	rs, err := Load([]byte(user), defaults)
	require.NoError(t, err)
	assert.Len(t, rs, len(defaults)) // +1 added, -1 disabled
	names := map[string]Rule{}
	for _, r := range rs {
		names[r.Name] = r
	}
	assert.Equal(t, fault.ActionDrain, names["dbe_alone"].Action)
	assert.Equal(t, 90*time.Second, names["dbe_alone"].Window)
	assert.Equal(t, "dbe_alone", rs[0].Name, "an override keeps the default's place")
	assert.NotContains(t, names, "xid_31")
	assert.Equal(t, "pcie_replays", rs[len(rs)-1].Name)
	// The defaults passed in are not changed.
	assert.Equal(t, fault.ActionCordon, defaults[0].Action)

	empty, err := Load(nil, defaults)
	require.NoError(t, err)
	assert.Len(t, empty, len(defaults))
}

func TestLoadErrorsNameRuleAndField(t *testing.T) {
	const base = `{name: r1, fault_type: gpu.thermal, severity: P2, action: none, blast_radius: gpu, confidence: 0.5, entity: gpu, window: 1m, all: [{signal: s, op: ">", value: 1}]}`
	cases := map[string]struct{ yaml, want string }{
		"type":        {strings.Replace(base, "gpu.thermal", "gpu.on_fire", 1), `rule "r1": field fault_type`},
		"severity":    {strings.Replace(base, "P2", "P9", 1), `rule "r1": field severity`},
		"action":      {strings.Replace(base, "action: none", "action: reboot", 1), `rule "r1": field action`},
		"blast":       {strings.Replace(base, "blast_radius: gpu", "blast_radius: rack", 1), `rule "r1": field blast_radius`},
		"entity":      {strings.Replace(base, "entity: gpu", "entity: switch", 1), `rule "r1": field entity`},
		"window":      {strings.Replace(base, "window: 1m", "window: 0s", 1), `rule "r1": field window`},
		"confidence":  {strings.Replace(base, "0.5", "1.5", 1), `rule "r1": field confidence`},
		"no cond":     {strings.Replace(base, `all: [{signal: s, op: ">", value: 1}]`, `all: []`, 1), `rule "r1": field all`},
		"op":          {strings.Replace(base, `op: ">"`, `op: "~"`, 1), `rule "r1": field all[0]: op`},
		"value":       {strings.Replace(base, `, value: 1`, ``, 1), `rule "r1": field all[0]: value`},
		"agg":         {strings.Replace(base, `op: ">"`, `agg: p99, op: ">"`, 1), `rule "r1": field all[0]: agg`},
		"in+op":       {strings.Replace(base, `op: ">", value: 1`, `in: [1], op: ">"`, 1), `rule "r1": field all[0]: in`},
		"in item":     {strings.Replace(base, `op: ">", value: 1`, `in: [[1]]`, 1), `rule "r1": field all[0]: in[0]`},
		"signal":      {strings.Replace(base, `signal: s`, `signal: ""`, 1), `rule "r1": field all[0]: signal`},
		"name":        {strings.Replace(base, "name: r1", `name: ""`, 1), `field name`},
		"typo field":  {strings.Replace(base, "window", "windw", 1), `field windw not found`},
		"duration":    {strings.Replace(base, "1m", "soon", 1), `parsing YAML`},
		"dup":         {base + "\n  - " + base, `rule "r1": field name: defined twice`},
		"last<0":      {strings.Replace(base, `value: 1`, `value: 1, last_samples: -1`, 1), `rule "r1": field all[0]: last_samples`},
		"min>last":    {strings.Replace(base, `value: 1`, `value: 1, last_samples: 2, min_samples: 3`, 1), `rule "r1": field all[0]: min_samples`},
		"absent+last": {strings.Replace(base, `op: ">", value: 1`, `agg: absent, last_samples: 2`, 1), `rule "r1": field all[0]: last_samples`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load([]byte("rules:\n  - "+c.yaml), nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := Load([]byte("rules:\n  - "+base), nil)
	assert.NoError(t, err, "the base case is valid")
}

func FuzzLoad(f *testing.F) {
	seed, err := os.ReadFile("defaults.yaml")
	require.NoError(f, err)
	f.Add(seed)
	f.Add([]byte("rules: [{name: x, disabled: true}]"))
	f.Add([]byte("rules:\n  - {name: a, all: [{signal: s, in: [1, b]}]}"))
	defaults, err := Default()
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := Load(data, defaults)
		if err != nil {
			return
		}
		// Whatever loads must evaluate without panicking.
		ev := NewEvaluator(rs, Limits{MaxEntities: 4, MaxSamplesPerSeries: 4})
		now := time.Unix(1000, 0)
		for _, r := range rs {
			for _, c := range append(append([]Condition{}, r.All...), r.Any...) {
				ev.Observe(fault.Entity{Kind: r.Entity, Key: "k"}, c.Signal, 1, now)
			}
		}
		ev.Evaluate(now)
	})
}
