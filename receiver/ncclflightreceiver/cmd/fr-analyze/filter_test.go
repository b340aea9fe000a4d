package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
)

func TestParseRanks(t *testing.T) {
	got, err := parseRanks("0-3,9, 12 - 13")
	require.NoError(t, err)
	assert.Equal(t, map[int]bool{0: true, 1: true, 2: true, 3: true, 9: true, 12: true, 13: true}, got)
	for in, want := range map[string]string{
		"":           `--ranks "": "" is empty`,
		"1,,2":       `--ranks "1,,2": "" is empty`,
		"a":          `--ranks "a": "a" is not a rank`,
		"-1":         `--ranks "-1": "-1" is not a rank`,
		"3-1":        `--ranks "3-1": "3-1" ends before it starts`,
		"1-":         `--ranks "1-": "1-" is not a range of ranks`,
		"0-99999999": `--ranks "0-99999999": "0-99999999" spans more than`,
	} {
		_, err := parseRanks(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want)
	}
}

func runErr(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	assert.Empty(t, out.String(), "a usage error prints no result")
	return code, errOut.String()
}

func TestFilterErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ranks", "3-1"}, `fr-analyze: --ranks "3-1": "3-1" ends before it starts`},
		{[]string{"--ranks", "99"}, `fr-analyze: --ranks "99": no dump read is of those ranks (read: 0-3)`},
		{[]string{"--pg", " "}, `fr-analyze: --pg " ": give a process group id`},
		{[]string{"--pg", "999"}, `fr-analyze: --pg "999": no process group of the dumps read has that id`},
		{[]string{"--pg", "EXPERT_MODEL_PARALLEL_GROUP"}, `--pg "EXPERT_MODEL_PARALLEL_GROUP": no process group`},
	} {
		code, stderr := runErr(t, append(tc.args, fixture("dp4-hang2-v2.4"))...)
		assert.Equal(t, exitError, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

func TestFilterRanks(t *testing.T) {
	code, text, res := analyzeArgs(t, "--ranks", "2", fixture("dp4-hang2-v2.4"))
	assert.Equal(t, exitFindings, code)
	inc := only(t, res)
	require.Equal(t, []string{string(analysis.KindHang)}, kinds(inc))
	assert.Zero(t, inc.Hidden)
	assert.Equal(t, []int{0, 1, 2, 3}, inc.Ranks, "every rank is still analysed")
	assert.Contains(t, text, "[1] HANG in process group 0 (default_pg)")

	code, text, res = analyzeArgs(t, "--ranks", "0-1,3", fixture("dp4-hang2-v2.4"))
	assert.Equal(t, exitClean, code, "nothing reported about those ranks")
	inc = only(t, res)
	assert.Empty(t, inc.Findings)
	assert.Equal(t, 1, inc.Hidden)
	assert.Equal(t, "no finding about --ranks 0-1,3 (1 other finding hidden)", strings.Split(text, "\n")[1])

	// Stacks of the ranks asked for only.
	_, _, res = analyzeArgs(t, "--stall-after", "11m", "--ranks", "0", fixture("dp4-hang2-v2.4"))
	inc = only(t, res)
	require.Equal(t, []string{string(analysis.KindMissingRanks), string(analysis.KindPGStatusDivergence)}, kinds(only(t, mustAnalyze(t, "--stall-after", "11m", fixture("dp4-hang2-v2.4")))))
	assert.Empty(t, inc.Findings, "the findings name rank 2, not 0")
	_, _, res = analyzeArgs(t, "--stall-after", "11m", "--ranks", "0,2", fixture("dp4-hang2-v2.4"))
	inc = only(t, res)
	require.NotEmpty(t, inc.Findings)
	stacks := []string{}
	for r := range inc.Findings[0].PythonStacks {
		stacks = append(stacks, r)
	}
	assert.ElementsMatch(t, []string{"0", "2"}, stacks)
}

func mustAnalyze(t *testing.T, args ...string) result {
	t.Helper()
	_, _, res := analyzeArgs(t, args...)
	return res
}

func TestFilterPG(t *testing.T) {
	for _, pg := range []string{"0", "default_pg", "DEFAULT_PG"} {
		code, _, res := analyzeArgs(t, "--pg", pg, fixture("dp4-hang2-v2.4"))
		assert.Equal(t, exitFindings, code, pg)
		assert.Len(t, only(t, res).Findings, 1, pg)
	}
	// A hang spans groups: --pg matches any group its evidence names.
	_, _, res := analyzeArgs(t, realGPUError)
	hang := only(t, res).Findings[0]
	require.Equal(t, string(analysis.KindHang), hang.Kind)
	var other string
	for _, g := range hang.Groups {
		if g.Name != hang.PGName {
			other = g.Name
		}
	}
	require.NotEmpty(t, other, "the hang names several groups: %v", hang.Groups)
	_, _, res = analyzeArgs(t, "--pg", other, realGPUError)
	assert.Len(t, only(t, res).Findings, 1)
}

func TestGroupsOf(t *testing.T) {
	c := newIncident(16)
	c.pgs["74"] = frdumpPG("74", "EXPERT_MODEL_PARALLEL_GROUP")
	f := toFinding(analysis.Finding{Kind: analysis.KindHang, PGName: "41", PGDesc: "TENSOR_MODEL_PARALLEL_GROUP", Evidence: map[string]string{
		"rank.12.pg.74.last_enqueued_collective": "20536",
		"pg.58.last_enqueued_collective_max":     "6872",
		"rank.12.python_stack":                   "f (a.py:1); g (b.py:2)",
		"culprit_ranks":                          "{12}",
	}}, c)
	assert.Equal(t, []groupRef{{"41", "TENSOR_MODEL_PARALLEL_GROUP"}, {"58", ""}, {"74", "EXPERT_MODEL_PARALLEL_GROUP"}}, f.Groups)
	assert.Equal(t, map[string][]string{"12": {"f (a.py:1)", "g (b.py:2)"}}, f.PythonStacks)
	assert.True(t, f.aboutGroup("expert_model_parallel_group"))
	assert.True(t, f.aboutGroup("58"))
	assert.False(t, f.aboutGroup("5"))
}
