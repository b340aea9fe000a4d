package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

var (
	t0         = time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)
	nodeAction = []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}
)

const cooldown = 30 * time.Minute

func TestOpenAfterResolveIsLate(t *testing.T) {
	s := New(cooldown)
	assert.True(t, s.Open("f1", "n1", true, t0))
	assert.True(t, s.Open("f1", "n1", true, t0.Add(time.Second)), "an update")
	assert.Empty(t, s.Resolve("f1", "n1", t0.Add(time.Minute)).Skip)
	assert.False(t, s.Open("f1", "n1", true, t0.Add(2*time.Minute)), "an update after the resolution")

	// Resolved before its open: the open that follows is late too.
	assert.Equal(t, "resolved before any open record (out of order): nothing to undo", s.Resolve("f2", "n1", t0).Skip)
	assert.False(t, s.Open("f2", "n1", true, t0.Add(time.Second)))
}

func TestPlanQuarantineActsOncePerFault(t *testing.T) {
	s := New(cooldown)
	s.Open("f1", "n1", true, t0)
	p := s.PlanQuarantine("f1", "n1", nodeAction, t0)
	assert.Equal(t, QuarantinePlan{Actions: nodeAction}, p)

	// Not yet answered (a platform error): asked again.
	assert.Equal(t, p, s.PlanQuarantine("f1", "n1", nodeAction, t0))

	s.Quarantined("f1", "n1", nodeAction, true, "")
	assert.Equal(t, QuarantinePlan{Actions: nodeAction, Skip: "duplicate: fault already acted on"},
		s.PlanQuarantine("f1", "n1", nodeAction, t0), "the duplicate names every action for the audit")
}

func TestPlanQuarantineEscalationAddsOnlyNewActions(t *testing.T) {
	s := New(cooldown)
	s.Open("f1", "n1", true, t0)
	first := []actuator.Action{actuator.ActionTaint, actuator.ActionCondition}
	s.Quarantined("f1", "n1", first, true, "")
	p := s.PlanQuarantine("f1", "n1", nodeAction, t0)
	assert.Equal(t, []actuator.Action{actuator.ActionCordon}, p.Actions)
	assert.Empty(t, p.Skip)
}

func TestPlanQuarantineForeignAnswerIsFinal(t *testing.T) {
	s := New(cooldown)
	s.Open("f1", "n1", true, t0)
	s.Quarantined("f1", "n1", nodeAction, false, "") // someone else's cordon
	assert.Equal(t, "duplicate: fault already acted on", s.PlanQuarantine("f1", "n1", nodeAction, t0).Skip)
	// Not ours: its resolution releases nothing.
	assert.Equal(t, ReleaseDecision{}, s.Resolve("f1", "n1", t0).Release)
}

func TestPlanQuarantineWithoutNode(t *testing.T) {
	s := New(cooldown)
	s.Open("f1", "", true, t0)
	assert.Equal(t, QuarantinePlan{Actions: nodeAction, Skip: "the record names no node"}, s.PlanQuarantine("f1", "", nodeAction, t0))
}

func TestPlanQuarantineCooldownAfterRelease(t *testing.T) {
	s := New(cooldown)
	s.Open("f1", "n1", true, t0)
	s.Quarantined("f1", "n1", nodeAction, true, "")
	s.Released("n1", t0.Add(time.Hour))

	s.Open("f2", "n1", true, t0.Add(time.Hour+10*time.Minute))
	plan := s.PlanQuarantine("f2", "n1", nodeAction, t0.Add(time.Hour+10*time.Minute))
	assert.Equal(t, "cooldown: returned to service 10m0s ago (cooldown 30m0s)", plan.Skip)
	assert.Equal(t, RailCooldown, plan.Rail)
	assert.Empty(t, s.PlanQuarantine("f2", "n1", nodeAction, t0.Add(time.Hour+cooldown)).Skip, "the cooldown is over")

	// A node the exporter still holds is in no cooldown: an escalation acts.
	s.Quarantined("f2", "n1", []actuator.Action{actuator.ActionTaint}, true, "")
	s.Open("f3", "n1", true, t0.Add(time.Hour+31*time.Minute))
	assert.Empty(t, s.PlanQuarantine("f3", "n1", nodeAction, t0.Add(time.Hour+31*time.Minute)).Skip)
}

func TestWebhookOncePerFaultAndSeverityRise(t *testing.T) {
	s := New(cooldown)
	s.Open("f1", "n1", true, t0)
	assert.True(t, s.WebhookDue("f1", fault.SeverityP2))
	s.WebhookSent("f1", fault.SeverityP2)
	assert.False(t, s.WebhookDue("f1", fault.SeverityP2), "a duplicate")
	assert.False(t, s.WebhookDue("f1", fault.SeverityP3), "a lower severity")
	assert.True(t, s.WebhookDue("f1", fault.SeverityP1), "an escalation pages")
	s.WebhookSent("f1", fault.SeverityP1)
	assert.False(t, s.WebhookDue("f1", fault.SeverityP1))
	assert.True(t, s.Resolve("f1", "n1", t0).Webhooked, "its resolution is sent too")
}
