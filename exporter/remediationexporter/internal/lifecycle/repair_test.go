package lifecycle

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

func repairPlan(id string) RepairPlan {
	return RepairPlan{FaultID: id, FaultType: "gpu.memory.dbe", GPUUUID: "GPU-5", Rule: "p1_hardware",
		Ladder: []repair.Action{repair.ActionGPUReset, repair.ActionReboot},
		Checks: []repair.CheckSpec{{Check: repair.CheckDiag, Level: 2}}, Onset: t0.Add(-time.Minute)}
}

func stepsOf(l Loop) []repair.Step {
	out := make([]repair.Step, len(l.History))
	for i, ev := range l.History {
		out[i] = ev.Step
	}
	return out
}

// The loop starts only on a node held for the fault, moves only along its
// edges, climbs the ladder on failure and ends in rma, holding the node.
func TestRepairLoopLadder(t *testing.T) {
	s := New(cooldown)
	_, ok := s.StartRepair("n1", repairPlan("f1"), t0)
	assert.False(t, ok, "not held: no loop")
	quarantined(s, "f1", "n1", true, "")
	l, ok := s.StartRepair("n1", repairPlan("f1"), t0)
	require.True(t, ok)
	assert.Equal(t, []repair.Step{repair.StepOnset, repair.StepRecorded, repair.StepQuarantined}, stepsOf(l))
	assert.Equal(t, repair.ActionGPUReset, l.Action)
	assert.Equal(t, 1, l.Attempt)

	_, _, ok = s.AdvanceRepair("n1", repair.StepVerified, t0, "")
	assert.False(t, ok, "no skipping steps")
	at := t0
	for _, to := range []repair.Step{repair.StepDrained, repair.StepRepairing, repair.StepRepaired, repair.StepVerifying} {
		at = at.Add(time.Minute)
		left, spent, ok := s.AdvanceRepair("n1", to, at, "")
		require.True(t, ok, to)
		assert.Equal(t, time.Minute, spent, "time in %s", left)
	}
	to, left, _, ok := s.EscalateRepair("n1", at.Add(time.Minute), "verification failed")
	require.True(t, ok)
	assert.Equal(t, repair.StepDrained, to, "back to drained with the next repair")
	assert.Equal(t, repair.StepVerifying, left)
	l, _ = s.RepairLoop("n1")
	assert.Equal(t, repair.ActionReboot, l.Action)
	assert.Equal(t, 2, l.Attempt)

	d := s.decideRelease("n1", s.nodes["n1"])
	assert.Equal(t, RailRepair, d.Rail, "resolution does not release a node in the loop")
	assert.False(t, d.Schedule)

	to, _, _, ok = s.EscalateRepair("n1", at.Add(2*time.Minute), "reboot failed")
	require.True(t, ok)
	assert.Equal(t, repair.StepRMA, to)
	l, _ = s.RepairLoop("n1")
	assert.Equal(t, repair.ActionRMA, l.Action)
	_, _, _, ok = s.EscalateRepair("n1", at.Add(3*time.Minute), "again")
	assert.False(t, ok, "rma is the end")
	h, _ := s.Holding("n1")
	assert.Contains(t, h.Reason, "RMA review")
	require.NotNil(t, h.Repair)
	assert.Equal(t, repair.StepRMA, h.Repair.Step)
	assert.Equal(t, map[repair.Step]int{repair.StepRMA: 1}, s.RepairSteps())

	s.Released("n1", at.Add(time.Hour))
	_, ok = s.RepairLoop("n1")
	assert.False(t, ok, "a release (a human's) ends the loop")
}

// A node that never drained for its first repair climbs the ladder where
// it is; a second fault joins the running loop.
func TestRepairLoopDrainTimeoutAndJoin(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", true, "")
	quarantined(s, "f2", "n1", true, "")
	_, ok := s.StartRepair("n1", repairPlan("f1"), t0)
	require.True(t, ok)
	_, ok = s.StartRepair("n1", repairPlan("f2"), t0)
	assert.False(t, ok)
	to, _, _, ok := s.EscalateRepair("n1", t0.Add(time.Hour), "drain timed out")
	require.True(t, ok)
	assert.Equal(t, repair.StepQuarantined, to)
	l, _ := s.RepairLoop("n1")
	assert.Equal(t, []string{"f1", "f2"}, l.FaultIDs)
	assert.Equal(t, repair.ActionReboot, l.Action)
}

// A loop whose quarantined entry was lost resumes in quarantined.
func TestRepairLoopRestoreWithoutQuarantinedEntry(t *testing.T) {
	s := New(cooldown)
	s.RestoreQuarantine("f1", "n1", nil, true, t0)
	s.RestoreRepair("n1", repairPlan("f1"), repair.StepOnset, repair.ActionGPUReset, 1, "", nil, t0.Add(-time.Minute), "")
	s.RestoreRepair("n1", repairPlan("f1"), repair.StepRecorded, repair.ActionGPUReset, 1, "", nil, t0, "")
	l, ok := s.RepairLoop("n1")
	require.True(t, ok)
	assert.Equal(t, repair.StepQuarantined, l.Step)
	_, _, ok = s.AdvanceRepair("n1", repair.StepDrained, t0.Add(time.Minute), "")
	assert.True(t, ok)
}

// History and faults are bounded.
func TestRepairLoopBounded(t *testing.T) {
	s := New(cooldown)
	for i := range MaxRepairFaults + 5 {
		quarantined(s, fmt.Sprint("f", i), "n1", true, "")
	}
	_, ok := s.StartRepair("n1", repairPlan("f0"), t0)
	require.True(t, ok)
	for i := 1; i < MaxRepairFaults+5; i++ {
		s.StartRepair("n1", repairPlan(fmt.Sprint("f", i)), t0)
	}
	for i := range MaxRepairHistory {
		s.RestoreRepair("n1", RepairPlan{}, repair.StepQuarantined, "", 0, "", nil, t0.Add(time.Duration(i)*time.Second), "")
	}
	l, _ := s.RepairLoop("n1")
	assert.Len(t, l.History, MaxRepairHistory)
	assert.Len(t, l.FaultIDs, MaxRepairFaults)
}

// Replaying the audited steps rebuilds the loop where it was; a node in a
// loop is not held for a human by HoldQuarantined, one in rma is held.
func TestRepairLoopRestore(t *testing.T) {
	s := New(cooldown)
	s.RestoreQuarantine("f1", "n1", nil, true, t0)
	s.RestoreQuarantine("f2", "n2", nil, true, t0)
	p := repairPlan("f1")
	s.RestoreRepair("n1", p, repair.StepOnset, repair.ActionGPUReset, 1, "", nil, p.Onset, "")
	s.RestoreRepair("n1", p, repair.StepQuarantined, repair.ActionGPUReset, 1, "", nil, t0, "")
	s.RestoreRepair("n1", RepairPlan{FaultID: "f1"}, repair.StepRepairing, repair.ActionReboot, 2, "boot-1", nil, t0.Add(time.Hour), "")
	assert.Equal(t, 2, s.HoldQuarantined("restart"))
	l, ok := s.RepairLoop("n1")
	require.True(t, ok)
	assert.Equal(t, repair.StepRepairing, l.Step)
	assert.Equal(t, repair.ActionReboot, l.Action)
	assert.Equal(t, 2, l.Attempt)
	assert.Equal(t, "boot-1", l.Ref)
	assert.Equal(t, p.Onset, l.Onset)
	assert.Equal(t, p.Ladder, l.Ladder)
	assert.Equal(t, t0.Add(time.Hour), l.Since)
	h1, _ := s.Holding("n1")
	assert.NotContains(t, h1.Reason, "restart", "its loop resumes")
	h2, _ := s.Holding("n2")
	assert.Contains(t, h2.Reason, "restart")

	s.RestoreRepair("n1", RepairPlan{FaultID: "f1"}, repair.StepRMA, repair.ActionRMA, 2, "", nil, t0.Add(2*time.Hour), "")
	s.RestoreRepair("n1", RepairPlan{FaultID: "f1"}, repair.StepRMA, repair.ActionRMA, 2, "rma_requested", nil, t0.Add(2*time.Hour), "")
	l, _ = s.RepairLoop("n1")
	assert.Equal(t, "rma_requested", l.Ref)
	assert.Equal(t, repair.StepRMA, l.History[len(l.History)-1].Step)
	assert.NotEqual(t, repair.StepRMA, l.History[len(l.History)-2].Step, "the request's entry adds no step")
	h1, _ = s.Holding("n1")
	assert.Contains(t, h1.Reason, "RMA review")
	s.RestoreRelease("n1", t0.Add(3*time.Hour))
	_, ok = s.RepairLoop("n1")
	assert.False(t, ok)
}

// A confirmation and a refusal to confirm are replayed too: confirmed, the
// loop goes on; not confirmed, it ends and the node waits for a human.
func TestRepairLoopRestoreConfirmation(t *testing.T) {
	s := New(cooldown)
	s.RestoreQuarantine("f1", "n1", nil, true, t0)
	s.RestoreRepair("n1", repairPlan("f1"), repair.StepQuarantined, repair.ActionGPUReset, 1, "", nil, t0, "")
	s.RestoreRepair("n1", RepairPlan{FaultID: "f1"}, repair.StepDrained, repair.ActionGPUReset, 1, RefConfirmed, nil, t0.Add(time.Minute), "")
	l, _ := s.RepairLoop("n1")
	assert.True(t, l.Confirmed)
	assert.Equal(t, repair.StepQuarantined, l.Step, "a confirmation is no step")
	s.SetVerification("n1", false, []repair.CheckResult{{Check: "dcgm_diag"}}, t0.Add(2*time.Minute))
	l, _ = s.RepairLoop("n1")
	require.Len(t, l.Verifications, 1)
	assert.False(t, l.Verifications[0].Passed)

	s.RestoreQuarantine("f2", "n2", nil, true, t0)
	s.RestoreRepair("n2", repairPlan("f2"), repair.StepQuarantined, repair.ActionGPUReset, 1, "", nil, t0, "")
	s.RestoreRepair("n2", RepairPlan{FaultID: "f2"}, repair.StepDrained, repair.ActionGPUReset, 1, RefUnconfirmed, nil, t0, "no ECC error")
	_, ok := s.RepairLoop("n2")
	assert.False(t, ok)
	h, _ := s.Holding("n2")
	assert.Contains(t, h.Reason, "did not confirm fault f2: no ECC error")
}
