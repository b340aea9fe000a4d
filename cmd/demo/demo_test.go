package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScenarioLoads(t *testing.T) {
	scs, err := testbed.ParseScenarios(defaultScenario)
	require.NoError(t, err)
	require.Len(t, scs, 1)
	sc := scs[0]
	assert.Equal(t, 64, sc.Ranks())
	require.Len(t, sc.Injects, 2)
	assert.NotEqual(t, sc.Injects[0].Node, sc.Injects[1].Node, "the two faults are on two nodes")
	assert.Len(t, sc.Expect, 2)
}

func TestLocate(t *testing.T) {
	topo := newTopology([]testbed.NodeInputs{
		{Host: "demo-n0", JobID: "job", Index: 0, GPUUUIDs: []string{"GPU-a", "GPU-b"}},
		{Host: "demo-n1", JobID: "job", Index: 1, GPUUUIDs: []string{"GPU-c", "GPU-d"}},
	}, 2)
	for name, tc := range map[string]struct {
		r    fault.Record
		want place
	}{
		"gpu entity": {fault.Record{Entity: fault.Entity{Kind: fault.EntityGPU, Key: "GPU-d"}},
			place{host: "demo-n1", node: 1, gpu: 1, rank: 3}},
		"rank entity": {fault.Record{Entity: fault.Entity{Kind: fault.EntityRank, Key: "job/2"}},
			place{host: "demo-n1", node: 1, gpu: 0, rank: 2}},
		"node entity": {fault.Record{Entity: fault.Entity{Kind: fault.EntityNode, Key: "demo-n0"}},
			place{host: "demo-n0", node: 0, gpu: -1, rank: -1}},
		"another job's rank": {fault.Record{Entity: fault.Entity{Kind: fault.EntityRank, Key: "other/2"}},
			place{node: -1, gpu: -1, rank: -1}},
	} {
		assert.Equal(t, tc.want, topo.locate(tc.r), name)
	}
}

func TestCause(t *testing.T) {
	r := fault.Record{Rule: "straggler_compute", Action: fault.Action("cordon"),
		Summary: "straggler.compute on rank:job/43 (node demo-n5): straggler.verdict=straggler.compute -> cordon"}
	assert.Equal(t, "straggler_compute [straggler.verdict=straggler.compute]", cause(r))
	r.State = fault.StateUpdate
	assert.NotContains(t, faultLine(r, place{node: -1, gpu: -1, rank: -1}, "+1.0s"), "cause=")
}

// TestTailAudit: complete lines are handed over, a partial line waits for
// its end, and a line that is not JSON is reported, not fatal.
func TestTailAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	content := `{"decision":"dry_run","step":"quarantine","node":"demo-n5","actions":["taint","condition"],"fault.type":"straggler.compute","fault.id":"77fab3affa0dcc50"}
not json
{"decision":"skipped","step":"record","reason":"duplicate"}
{"decision":"dry_run","step":"web`
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one final read
	var entries []auditEntry
	var errs []error
	tailAudit(ctx, path, func(e auditEntry) { entries = append(entries, e) }, func(err error) { errs = append(errs, err) })
	require.Len(t, entries, 2)
	assert.Len(t, errs, 1)
	line := auditLine(entries[0])
	assert.True(t, strings.HasPrefix(line, "REMEDIATION dry-run  quarantine [taint,condition]  node=demo-n5"), line)
}
