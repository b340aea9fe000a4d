package faultconsoleextension

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
)

// lifecycleFixture holds node-b (no repair loop), node-c repairing with a
// GPU reset after a failed verification, and node-d in rma.
func lifecycleFixture(t *testing.T) (*apiFixture, time.Time) {
	t.Helper()
	f := newFixture(t, false)
	cet := time.FixedZone("CET", 3600)
	t0 := f.clock.Now().Add(-30 * time.Minute).In(cet)
	ctrl := consoletest.New(console.Breaker{Window: time.Hour},
		console.QuarantinedNode{Node: "node-b", FaultIDs: []string{"f-xid"}, Actions: []string{"cordon"}, Since: f.onset},
		console.QuarantinedNode{Node: "node-c", FaultIDs: []string{"f-dbe"}, Actions: []string{"drain"}, Reason: "P1 dbe", Since: t0,
			Lifecycle: &console.Lifecycle{Step: "repairing", Since: t0.Add(20 * time.Minute), Repair: "gpu_reset", Attempt: 2,
				History: []console.LifecycleStep{
					{Step: "onset", At: t0.Add(-time.Minute)}, {Step: "recorded", At: t0}, {Step: "quarantined", At: t0, Detail: "drain"},
					{Step: "drained", At: t0.Add(5 * time.Minute)}, {Step: "repairing", At: t0.Add(6 * time.Minute), Detail: "gpu_reset #1"},
					{Step: "repaired", At: t0.Add(8 * time.Minute)}, {Step: "verifying", At: t0.Add(9 * time.Minute)},
					{Step: "repairing", At: t0.Add(20 * time.Minute), Detail: "gpu_reset #2"}},
				Verifications: []console.Verification{{At: t0.Add(19 * time.Minute), Checks: "dcgm_diag level 2", Passed: false, Detail: "memory test failed on GPU 3"}}}},
		console.QuarantinedNode{Node: "node-d", Since: t0, Lifecycle: &console.Lifecycle{Step: "rma", Since: f.clock.Now().Add(time.Minute),
			Repair: "rma", Attempt: 3}},
	)
	f.store.Attach(ctrl)
	return f, t0.UTC()
}

func TestAPINodesLifecycle(t *testing.T) {
	f, t0 := lifecycleFixture(t)
	w := f.do(t, "GET", "/api/v1/nodes", "", withToken(testToken))
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `"steps":["onset","recorded","quarantined","drained","repairing","repaired","verifying","verified","released","rma"]`)
	var ns consoleclient.Nodes
	f.call(t, "GET", "/api/v1/nodes", "", 200, &ns)
	require.Len(t, ns.Nodes, 3)
	assert.Nil(t, ns.Nodes[0].Lifecycle, "node-b runs no repair loop")

	c := ns.Nodes[1]
	require.NotNil(t, c.Lifecycle)
	assert.Equal(t, "repairing", c.Lifecycle.Step)
	assert.Equal(t, t0.Add(20*time.Minute), c.Lifecycle.Since)
	assert.Equal(t, time.UTC, c.Lifecycle.Since.Location(), "times are UTC")
	assert.InDelta(t, 600, c.Lifecycle.InStepSeconds, 0.001, "10 minutes in the step by the console's clock")
	assert.Equal(t, "gpu_reset", c.Lifecycle.Repair)
	assert.Equal(t, 2, c.Lifecycle.Attempt)
	assert.False(t, c.Lifecycle.Alarm)
	require.Len(t, c.Lifecycle.History, 8)
	assert.Equal(t, consoleclient.LifecycleStep{Step: "repairing", At: t0.Add(6 * time.Minute), Detail: "gpu_reset #1"}, c.Lifecycle.History[4])
	assert.Equal(t, &consoleclient.Verification{At: t0.Add(19 * time.Minute), Checks: "dcgm_diag level 2", Detail: "memory test failed on GPU 3"},
		c.Lifecycle.LastVerification())

	// rma is the alarm; a Since ahead of the console's clock counts 0.
	d := ns.Nodes[2]
	require.NotNil(t, d.Lifecycle)
	assert.True(t, d.Lifecycle.Alarm)
	assert.Zero(t, d.Lifecycle.InStepSeconds)
	assert.Nil(t, d.Lifecycle.LastVerification())
	w = f.do(t, "GET", "/api/v1/nodes/node-d", "", withToken(testToken))
	assert.Contains(t, w.Body.String(), `"history":[],"verifications":[]`, "empty lists, not null")

	// The clock moves: the time in the step with it.
	f.clock.Advance(90 * time.Second)
	var one consoleclient.Node
	f.call(t, "GET", "/api/v1/nodes/node-c", "", 200, &one)
	assert.InDelta(t, 690, one.Lifecycle.InStepSeconds, 0.001)
	assert.Equal(t, c.Lifecycle.History, one.Lifecycle.History)
	assert.Equal(t, "P1 dbe", one.Reason)
}

// Without a repair loop the answer is as before: no lifecycle, no steps.
func TestAPINodesWithoutLifecycle(t *testing.T) {
	f := newFixture(t, true)
	w := f.do(t, "GET", "/api/v1/nodes", "", withToken(testToken))
	require.Equal(t, 200, w.Code)
	assert.NotContains(t, w.Body.String(), "lifecycle")
	assert.NotContains(t, w.Body.String(), "steps")
	var one consoleclient.Node
	f.call(t, "GET", "/api/v1/nodes/node-b", "", 200, &one)
	assert.Equal(t, consoleclient.Node{Node: "node-b", FaultIDs: []string{"f-xid"}, Actions: []string{"cordon", "taint"}, Reason: "P1 xid", Since: f.onset}, one)
}

func TestAPINodeErrors(t *testing.T) {
	f, _ := lifecycleFixture(t)
	f.wantError(t, "GET", "/api/v1/nodes/node-z", "", 404, `node "node-z" is not quarantined by the remediation exporter`)
	f.wantError(t, "GET", "/api/v1/nodes/a%2Fb", "", 404, `node "a/b" is not quarantined`)
	ctrl := consoletest.New(console.Breaker{})
	ctrl.SetErr(errors.New("kubernetes API: forbidden"))
	f.store.Attach(ctrl)
	f.wantError(t, "GET", "/api/v1/nodes/node-c", "", 502, "listing quarantined nodes: kubernetes API: forbidden")
	f.store.Detach(ctrl)
	f.wantError(t, "GET", "/api/v1/nodes/node-c", "", 503, "no remediation exporter is attached")
}
