package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestRestoreRebuildsWhatWasDone(t *testing.T) {
	s := New(cooldown)
	s.RestoreQuarantine("held", "n1", nodeAction, true, t0)
	s.RestoreQuarantine("foreign", "n2", nodeAction, false, t0)
	s.RestoreWebhook("held", "n1", fault.SeverityP2, t0)
	s.RestoreWebhook("held", "n1", fault.SeverityP1, t0.Add(time.Minute))
	s.RestoreWebhook("held", "n1", fault.SeverityP3, t0.Add(2*time.Minute))
	s.RestoreResolved("gone", "n3", t0)

	assert.Equal(t, 3, s.Faults())
	assert.Equal(t, 1, s.HoldQuarantined("quarantined before the restart"), "only n1 is held by the exporter")
	now := t0.Add(time.Hour)
	assert.Equal(t, "duplicate: fault already acted on", s.PlanQuarantine("held", "n1", nodeAction, now).Skip)
	assert.Equal(t, "duplicate: fault already acted on", s.PlanQuarantine("foreign", "n2", nodeAction, now).Skip)
	assert.False(t, s.WebhookDue("held", fault.SeverityP1), "the highest severity sent counts")
	assert.False(t, s.Open("gone", "n3", true, now))

	// The restored quarantine waits for a human.
	assert.Equal(t, "waits for a human: quarantined before the restart", s.Resolve("held", "n1", now).Release.Skip)
}

func TestRestoreReleaseForgetsTheQuarantine(t *testing.T) {
	s := New(cooldown)
	s.RestoreQuarantine("f1", "n1", nodeAction, true, t0)
	s.RestoreRelease("n1", t0.Add(time.Hour))
	assert.Zero(t, s.HoldQuarantined("restart"))
	s.Open("f2", "n1", true, t0.Add(time.Hour+time.Minute))
	assert.Contains(t, s.PlanQuarantine("f2", "n1", nodeAction, t0.Add(time.Hour+time.Minute)).Skip, "cooldown",
		"the release time starts the cooldown")
}

func TestRestoreKeepsTheNewestTimeAndNode(t *testing.T) {
	s := New(cooldown)
	s.RestoreResolved("f1", "n1", t0.Add(time.Hour))
	s.RestoreWebhook("f1", "", fault.SeverityP1, t0) // older, no node
	assert.Equal(t, "n1", s.faults["f1"].node)
	assert.Equal(t, t0.Add(time.Hour), s.faults["f1"].lastRecord)
}
