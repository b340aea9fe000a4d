package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// withLoop replaces the fixture's controller with one holding node-3 (no
// repair loop), node-5 repairing with a GPU reset after a failed
// verification and node-7 in rma.
func withLoop(t *testing.T, f *fixture) time.Time {
	t.Helper()
	t0 := time.Now().UTC().Truncate(time.Second).Add(-2 * time.Hour)
	ctrl := consoletest.New(console.Breaker{Window: time.Hour},
		console.QuarantinedNode{Node: "node-3", FaultIDs: []string{"f-xid-79"}, Actions: []string{"cordon"}, Reason: "P1 xid_79", Since: t0},
		console.QuarantinedNode{Node: "node-5", FaultIDs: []string{"f-dbe"}, Actions: []string{"cordon", "drain"}, Reason: "P1 dbe", Since: t0},
		console.QuarantinedNode{Node: "node-7", FaultIDs: []string{"f-x"}, Actions: []string{"drain"}, Reason: "P1 xid", Since: t0})
	for _, s := range []struct {
		node string
		step repair.Step
		at   time.Duration
	}{{"node-5", repair.StepQuarantined, 0}, {"node-5", repair.StepDrained, 5 * time.Minute}, {"node-7", repair.StepQuarantined, 0}} {
		require.NoError(t, ctrl.Step(s.node, s.step, t0.Add(s.at), "detail of "+string(s.step)))
	}
	require.NoError(t, ctrl.Repair("node-5", repair.ActionGPUReset, t0.Add(6*time.Minute), "GPU 3"))
	require.NoError(t, ctrl.Step("node-5", repair.StepVerifying, t0.Add(8*time.Minute), ""))
	require.NoError(t, ctrl.Verify("node-5", t0.Add(9*time.Minute), "dcgm_diag level 2", false, "memory test failed on GPU 3"))
	require.NoError(t, ctrl.Repair("node-5", repair.ActionGPUReset, t0.Add(10*time.Minute), "GPU 3, again"))
	require.NoError(t, ctrl.Repair("node-7", repair.ActionReboot, t0.Add(time.Minute), "scontrol reboot"))
	require.NoError(t, ctrl.Step("node-7", repair.StepRMA, t0.Add(time.Hour), "every repair failed"))
	f.console.Detach(f.ctrl)
	f.console.Attach(ctrl)
	return t0
}

func TestNodesLifecycle(t *testing.T) {
	f := newFixture(t)
	t0 := withLoop(t, f)
	code, out, errOut := f.run(t, "nodes")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Regexp(t, `^NODE\s+STEP\s+IN STEP\s+REPAIR\s+LAST VERIFY\s+SINCE\s+FAULTS\s+ACTIONS\s+RELEASE PENDING\s+REASON$`, lines[0])
	since := fmtTime(t0)
	assert.Regexp(t, `^node-3\s+-\s+-\s+-\s+-\s+`+since+`\s+f-xid-79\s+cordon\s+false\s+P1 xid_79$`, lines[1])
	// In the step since t0+10m, by the console's clock: 1h50m and some
	// seconds, printed to the minute.
	assert.Regexp(t, `^node-5\s+repairing\s+1h5\dm\s+gpu_reset#2\s+failed \(dcgm_diag level 2\)\s+`+since+`\s+f-dbe\s+cordon,drain\s+false\s+P1 dbe$`, lines[2])
	assert.Regexp(t, `^node-7\s+rma!\s+1h0\dm\s+reboot#1\s+-\s+`, lines[3])

	// The JSON is the API's, with the loop's steps.
	code, out, _ = f.run(t, "--json", "nodes")
	require.Equal(t, 0, code)
	var ns consoleclient.Nodes
	require.NoError(t, json.Unmarshal([]byte(out), &ns))
	assert.Equal(t, "rma", ns.Steps[len(ns.Steps)-1])
	assert.True(t, ns.Nodes[2].Lifecycle.Alarm)
}

func TestNodeShowsHistory(t *testing.T) {
	f := newFixture(t)
	t0 := withLoop(t, f)
	code, out, errOut := f.run(t, "node", "node-5")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^step\s+repairing$`, out)
	assert.Regexp(t, `(?m)^in step\s+1h5\dm \(since `+fmtTime(t0.Add(10*time.Minute))+`\)$`, out)
	assert.Regexp(t, `(?m)^repair\s+gpu_reset#2$`, out)
	assert.Regexp(t, `(?m)^last verify\s+failed \(dcgm_diag level 2\) at `+fmtTime(t0.Add(9*time.Minute))+`: memory test failed on GPU 3$`, out)
	_, hist, ok := strings.Cut(out, "\nHISTORY\n")
	require.True(t, ok, out)
	hist, verifs, ok := strings.Cut(hist, "\nVERIFICATIONS\n")
	require.True(t, ok, out)
	h := strings.Split(strings.TrimSpace(hist), "\n")
	require.Len(t, h, 6, hist)
	assert.Regexp(t, `^AT\s+STEP\s+DETAIL$`, h[0])
	assert.Regexp(t, `^`+fmtTime(t0)+`\s+quarantined\s+detail of quarantined$`, h[1])
	assert.Regexp(t, `^`+fmtTime(t0.Add(6*time.Minute))+`\s+repairing\s+gpu_reset #1: GPU 3$`, h[3])
	assert.Regexp(t, `^`+fmtTime(t0.Add(8*time.Minute))+`\s+verifying\s+-$`, h[4])
	assert.Regexp(t, `^`+fmtTime(t0.Add(10*time.Minute))+`\s+repairing\s+gpu_reset #2: GPU 3, again$`, h[5])
	v := strings.Split(strings.TrimSpace(verifs), "\n")
	require.Len(t, v, 2)
	assert.Regexp(t, `^AT\s+CHECKS\s+RESULT\s+DETAIL$`, v[0])
	assert.Regexp(t, `^`+fmtTime(t0.Add(9*time.Minute))+`\s+dcgm_diag level 2\s+failed\s+memory test failed on GPU 3$`, v[1])

	code, out, _ = f.run(t, "node", "node-7")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^step\s+rma \(ALARM: every repair failed, the node waits for a human\)$`, out)
	assert.Contains(t, out, "\nVERIFICATIONS\nnone yet\n")

	code, out, _ = f.run(t, "node", "node-3")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^repair loop\s+none \(remediation runs no repair loop for this node\)$`, out)
	assert.NotContains(t, out, "HISTORY")

	code, out, _ = f.run(t, "node", "node-5", "--json")
	require.Equal(t, 0, code)
	var n consoleclient.Node
	require.NoError(t, json.Unmarshal([]byte(out), &n))
	assert.Len(t, n.Lifecycle.History, 5)

	code, _, errOut = f.run(t, "node", "node-9")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `node "node-9" is not quarantined by the remediation exporter (HTTP 404)`)
	for _, args := range [][]string{{"node"}, {"node", "a", "b"}, {"node", "node-5", "--all"}} {
		code, _, errOut = f.run(t, args...)
		assert.Equal(t, 2, code, "%q", args)
		assert.Contains(t, errOut, "usage: otelcol-gpu-ctl", "%q", args)
	}
}

func TestFmtAge(t *testing.T) {
	for sec, want := range map[float64]string{0: "0s", -5: "0s", math.NaN(): "0s", 59.9: "59s", 60: "1m00s", 1153: "19m13s",
		3600: "1h00m", 12420: "3h27m", 86400: "1d00h", 2*86400 + 3*3600 + 59: "2d03h", math.Inf(1): "106751d23h"} {
		assert.Equal(t, want, fmtAge(sec), "%v", sec)
	}
}
