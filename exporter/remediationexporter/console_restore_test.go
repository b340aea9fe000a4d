package remediationexporter

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
)

// What the console is given back after a restart is bounded however long
// the audit file: maxRecentFaults faults (the newest), and per fault the
// entries of its weightiest decision, at most maxRestoredEntries.
func TestRestoredFaultsAreBounded(t *testing.T) {
	r := newRestoredFaults()
	at := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	for i := range maxRecentFaults + 5 {
		r.add(audit.Entry{Time: at, Step: stepRecord, FaultID: fmt.Sprintf("f%05d", i), Decision: audit.DecisionSkipped})
	}
	require.Len(t, r.order, maxRecentFaults)
	assert.Len(t, r.byID, maxRecentFaults)
	assert.Equal(t, "f00005", r.order[0], "the oldest go first")

	for i := range 3 * maxRestoredEntries {
		r.add(audit.Entry{Time: at.Add(time.Duration(i) * time.Second), Step: stepRecord, FaultID: "f00005",
			Decision: audit.DecisionSkipped, Reason: "duplicate"})
	}
	f := r.byID["f00005"]
	assert.Len(t, f.entries, maxRestoredEntries)
	r.add(audit.Entry{Time: at.Add(time.Hour), Step: stepQuarantine, FaultID: "f00005", Decision: audit.DecisionFailed,
		Reason: "connection refused", Node: "xl003", Actions: []string{"cordon"}})
	r.add(audit.Entry{Time: at.Add(2 * time.Hour), Step: stepRecord, FaultID: "f00005", Decision: audit.DecisionSkipped})
	require.Len(t, f.entries, 1, "a weightier decision replaces the lighter ones")
	decision, action, reason := summarise(f.entries)
	assert.Equal(t, audit.DecisionFailed, decision)
	assert.Equal(t, "cordon", action)
	assert.Equal(t, "connection refused", reason)
	assert.Equal(t, at, f.first)
	assert.Equal(t, at.Add(2*time.Hour), f.last)
	assert.Equal(t, "xl003", f.recent.node)

	// Breaker entries and entries naming no fault are not faults.
	n := len(r.order)
	r.add(audit.Entry{Time: at, Step: stepBreaker, Event: breakerEventTripped, FaultID: "fx"})
	r.add(audit.Entry{Time: at, Step: stepRelease, Node: "xl003"})
	assert.Len(t, r.order, n)
}
