package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// readAuditFile reads an audit file as the demo's tail does: one entry a
// line.
func readAuditFile(t *testing.T, path string) []auditEntry {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []auditEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEntry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	return out
}

func readMetricsFile(t *testing.T, path string) recoveryMetrics {
	t.Helper()
	page, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := parseRecoveryMetrics(bytes.NewReader(page))
	require.NoError(t, err)
	return m
}

// The audit file and the gateway's telemetry page of one demo run
// (testdata/recovery, captured from `cmd/demo -nodes 2 -steps 24 -step 1s`
// with the repair loop on; the page cut to the remediation metrics): the
// NVLink fault's node went through the loop in a dry run, and the two
// sources agree.
func TestRecoveryFromCapturedRun(t *testing.T) {
	entries := readAuditFile(t, filepath.Join("testdata", "recovery", "remediation-audit.jsonl"))
	loops := repairLoops(entries)
	require.Len(t, loops, 1)
	l := loops[0]
	assert.Equal(t, "demo-n0", l.Node)
	assert.Equal(t, "nvlink.degraded", l.FaultType)
	assert.Equal(t, "86cbd9d9b15ab172", l.FaultID)
	var steps []string
	for _, s := range l.Steps {
		steps = append(steps, s.Step)
		assert.Equal(t, "gpu_reset", s.Action)
		assert.Equal(t, 1, s.Attempt)
	}
	var want []string
	for _, s := range repair.Steps[:len(repair.Steps)-1] { // less rma
		want = append(want, string(s))
	}
	assert.Equal(t, want, steps, "onset → released, every step audited")
	assert.True(t, l.ended())
	assert.True(t, l.dryRun())
	ttr, ok := l.recovery()
	require.True(t, ok)
	assert.InDelta(t, 5.988, ttr.Seconds(), 0.001)

	m := readMetricsFile(t, filepath.Join("testdata", "recovery", "gateway-metrics.prom"))
	assert.Equal(t, uint64(1), m.TimeToRecovery.Count)
	assert.InDelta(t, 5.98802347, m.TimeToRecovery.Sum, 1e-9)
	lo, hi, ok := m.TimeToRecovery.medianBucket()
	require.True(t, ok)
	assert.Equal(t, [2]float64{1, 10}, [2]float64{lo, hi})
	assert.Len(t, m.Steps, 8, "every step but released is left once")
	assert.InDelta(t, 5.618546374, m.Steps["onset"].Sum, 1e-9)
	assert.Empty(t, disagreements(loops, m))

	var out strings.Builder
	writeRecovery(&out, loops, &m, nil)
	text := out.String()
	for _, line := range []string{
		"  node demo-n0  fault nvlink.degraded 86cbd9d9b15ab172  (dry run: nothing called, each step as if done)\n",
		"    onset            +0.0s  gpu_reset attempt 1\n",
		"    recorded         +5.6s  gpu_reset attempt 1\n",
		"    released         +6.0s  gpu_reset attempt 1\n",
		"  time to recovery demo-n0: 6.0s onset → released (dry run)\n",
		"  gateway otelcol_remediation_time_to_recovery_seconds: count 1, sum 6.0s, mean 6.0s, median in bucket (1s, 10s]\n",
		"onset 5.6s (1), recorded 0.0s (1), quarantined 0.3s (1), drained 0.0s (1),",
		"  the audit file and the gateway's metrics agree\n",
	} {
		assert.Contains(t, text, line)
	}
	assert.NotContains(t, text, "MISMATCH")
}

// A page without the loop's observations, or with other ones, disagrees
// with the audit; the summary says so.
func TestRecoveryMismatch(t *testing.T) {
	loops := repairLoops(readAuditFile(t, filepath.Join("testdata", "recovery", "remediation-audit.jsonl")))
	empty, err := parseRecoveryMetrics(strings.NewReader(""))
	require.NoError(t, err)
	diffs := disagreements(loops, empty)
	require.NotEmpty(t, diffs)
	assert.Contains(t, diffs[0], "time to recovery: audit 1 observations, 5.988s; metrics 0, 0.000s")

	m := readMetricsFile(t, filepath.Join("testdata", "recovery", "gateway-metrics.prom"))
	m.TimeToRecovery.Sum += 2 // two seconds off
	diffs = disagreements(loops, m)
	require.Len(t, diffs, 1)
	assert.Contains(t, diffs[0], "time to recovery")

	var out strings.Builder
	writeRecovery(&out, loops, &empty, nil)
	assert.Contains(t, out.String(), "MISMATCH between the audit file and the gateway's metrics: time to recovery")
	assert.Contains(t, out.String(), "gateway otelcol_remediation_time_to_recovery_seconds: count 0, sum 0.0s\n")

	out.Reset()
	writeRecovery(&out, loops, nil, errNoTelemetry)
	assert.Contains(t, out.String(), "gateway metrics not read: "+errNoTelemetry.Error())
}

func TestRepairLoops(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	entry := func(sec int, node, step, decision string) auditEntry {
		return auditEntry{Time: at.Add(time.Duration(sec) * time.Second), Decision: decision, Step: "repair",
			Node: node, FaultID: "f-" + node, FaultType: "nvlink.degraded", LifecycleStep: step, RepairAction: "gpu_reset", RepairAttempt: 1}
	}
	entries := []auditEntry{
		entry(0, "a", "onset", "acted"),
		{Time: at, Decision: "acted", Step: "quarantine", Node: "a"}, // not the loop's
		entry(10, "a", "recorded", "acted"),
		entry(10, "b", "onset", "acted"),
		entry(11, "a", "quarantined", "acted"),
		entry(12, "a", "drained", "failed"), // a wait audited on the way
		entry(20, "a", "released", "acted"),
		entry(30, "b", "rma", "acted"),
		entry(40, "a", "onset", "dry_run"), // a's next loop
		entry(41, "a", "recorded", "dry_run"),
		entry(42, "", "recorded", "dry_run"), // no node: ignored
	}
	loops := repairLoops(entries)
	require.Len(t, loops, 3)
	assert.Equal(t, "a", loops[0].Node)
	assert.Len(t, loops[0].Steps, 4)
	ttr, ok := loops[0].recovery()
	assert.True(t, ok)
	assert.Equal(t, 20*time.Second, ttr)
	assert.True(t, loops[0].ended())
	assert.False(t, loops[0].dryRun())

	assert.Equal(t, "b", loops[1].Node)
	assert.True(t, loops[1].ended(), "rma ends a loop")
	_, ok = loops[1].recovery()
	assert.False(t, ok, "rma is no recovery")

	assert.Equal(t, "a", loops[2].Node)
	assert.False(t, loops[2].ended())
	assert.True(t, loops[2].dryRun())

	var out strings.Builder
	writeRecovery(&out, loops, nil, errNoTelemetry)
	assert.Contains(t, out.String(), "  time to recovery a: 20.0s onset → released\n")
	assert.Contains(t, out.String(), "  not recovered b: the loop is in rma\n")
	assert.Contains(t, out.String(), "  not recovered a: the loop is in recorded\n")

	out.Reset()
	writeRecovery(&out, nil, nil, nil)
	assert.Empty(t, out.String(), "nothing to say")
}

func TestMedianBucket(t *testing.T) {
	h := histogram{Count: 4, Sum: 50, Buckets: []bucket{{1, 0}, {10, 2}, {30, 3}, {math.Inf(1), 4}}}
	lo, hi, ok := h.medianBucket()
	assert.True(t, ok)
	assert.Equal(t, [2]float64{1, 10}, [2]float64{lo, hi})

	h = histogram{Count: 3, Buckets: []bucket{{1, 0}, {10, 1}, {30, 1}}} // no +Inf bucket
	lo, hi, ok = h.medianBucket()
	assert.True(t, ok)
	assert.Equal(t, 30.0, lo)
	assert.True(t, math.IsInf(hi, 1))
	assert.Equal(t, "+Inf", bound(hi))

	_, _, ok = histogram{}.medianBucket()
	assert.False(t, ok)
}

func TestParseRecoveryMetricsRejectsGarbage(t *testing.T) {
	_, err := parseRecoveryMetrics(strings.NewReader("otelcol_remediation_time_to_recovery_seconds_count{ 1\n"))
	assert.ErrorContains(t, err, "the gateway's telemetry page")
}

func TestReadRecoveryMetrics(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("testdata", "recovery", "gateway-metrics.prom"))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page)
	}))
	defer srv.Close()

	var kept []byte
	m, err := readRecoveryMetrics(context.Background(), srv.URL+"/metrics", func(p []byte) error { kept = p; return nil })
	require.NoError(t, err)
	assert.Equal(t, uint64(1), m.TimeToRecovery.Count)
	assert.Equal(t, page, kept)

	_, err = readRecoveryMetrics(context.Background(), srv.URL+"/other", nil)
	assert.ErrorContains(t, err, "404")
}
