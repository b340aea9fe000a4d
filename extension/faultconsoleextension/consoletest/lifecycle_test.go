package consoletest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// A node moves through the loop: quarantined, a GPU reset, a failed
// verification, a reboot, a pass; what Quarantined answered before does
// not change after.
func TestControllerLifecycle(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	c := New(console.Breaker{}, console.QuarantinedNode{Node: "n1", FaultIDs: []string{"f1"}})
	require.NoError(t, c.Step("n1", repair.StepQuarantined, t0, "cordon,taint"))
	before, err := c.Quarantined(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Repair("n1", repair.ActionGPUReset, t0.Add(time.Minute), "GPU 3"))
	require.NoError(t, c.Step("n1", repair.StepVerifying, t0.Add(2*time.Minute), "dcgm_diag level 2"))
	require.NoError(t, c.Verify("n1", t0.Add(3*time.Minute), "dcgm_diag level 2", false, "memory test failed on GPU 3"))
	require.NoError(t, c.Repair("n1", repair.ActionReboot, t0.Add(4*time.Minute), "scontrol reboot ASAP"))
	require.NoError(t, c.Verify("n1", t0.Add(9*time.Minute), "dcgm_diag level 2", true, ""))

	require.Len(t, before, 1)
	assert.Equal(t, &console.Lifecycle{Step: "quarantined", Since: t0,
		History: []console.LifecycleStep{{Step: "quarantined", At: t0, Detail: "cordon,taint"}}}, before[0].Lifecycle)
	nodes, err := c.Quarantined(ctx)
	require.NoError(t, err)
	l := nodes[0].Lifecycle
	assert.Equal(t, "verified", l.Step)
	assert.Equal(t, t0.Add(9*time.Minute), l.Since)
	assert.Equal(t, "reboot", l.Repair)
	assert.Equal(t, 2, l.Attempt)
	var steps []string
	for _, h := range l.History {
		steps = append(steps, h.Step)
	}
	assert.Equal(t, []string{"quarantined", "repairing", "verifying", "repairing", "verified"}, steps)
	assert.Equal(t, "gpu_reset #1: GPU 3", l.History[1].Detail)
	assert.Equal(t, "reboot #2: scontrol reboot ASAP", l.History[3].Detail)
	assert.Equal(t, []console.Verification{
		{At: t0.Add(3 * time.Minute), Checks: "dcgm_diag level 2", Detail: "memory test failed on GPU 3"},
		{At: t0.Add(9 * time.Minute), Checks: "dcgm_diag level 2", Passed: true},
	}, l.Verifications)

	// A caller changing what it was given changes nothing held.
	nodes[0].Lifecycle.History[0].Step = "changed"
	again, err := c.Quarantined(ctx)
	require.NoError(t, err)
	assert.Equal(t, "quarantined", again[0].Lifecycle.History[0].Step)

	require.ErrorContains(t, c.Step("n1", "fixed", t0, ""), `step "fixed" is not one of internal/repair's Steps`)
	require.ErrorContains(t, c.Repair("n1", "reflash", t0, ""), `repair "reflash" is not one of`)
	require.ErrorContains(t, c.Step("n2", repair.StepRMA, t0, ""), `node "n2" is not quarantined`)
	require.ErrorContains(t, c.Verify("n2", t0, "dcgm_diag", true, ""), `node "n2" is not quarantined`)
}
