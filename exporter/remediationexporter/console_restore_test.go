package remediationexporter

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
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

	// An audit line may hold up to audit.MaxLineBytes (a hand-edited or
	// damaged file): what is kept of it is clipped to the console's bounds.
	huge := strings.Repeat("x", audit.MaxLineBytes/2)
	r.add(audit.Entry{Time: at, Step: stepRecord, FaultID: huge, Decision: audit.DecisionActed})
	assert.Len(t, r.order, n, "no fault id is that long")
	r.add(audit.Entry{Time: at, Step: stepWebhook, FaultID: "big", FaultType: huge, Severity: huge, State: huge, Node: huge,
		Decision: audit.DecisionActed, Reason: huge, Outcome: huge, Actions: slices.Repeat([]string{huge}, 100)})
	r.add(audit.Entry{Time: at, Step: stepAcknowledge, FaultID: "big", Decision: audit.DecisionActed,
		Operator: huge, OperatorRemote: huge, OperatorReason: huge})
	big := r.byID["big"]
	for _, name := range []string{big.recent.typ, big.recent.severity, big.recent.state, big.recent.node} {
		assert.LessOrEqual(t, len(name), maxRestoredNameLen+len("…"))
	}
	require.Len(t, big.entries, 1)
	kept := big.entries[0]
	assert.LessOrEqual(t, len(kept.Reason), maxConsoleReason)
	assert.LessOrEqual(t, len(kept.Outcome), maxConsoleReason)
	require.Len(t, kept.Actions, maxRestoredActions)
	assert.LessOrEqual(t, len(kept.Actions[0]), maxRestoredNameLen+len("…"))
	require.NotNil(t, big.ack)
	assert.LessOrEqual(t, len(big.ack.By), console.MaxOperatorLen+len("…"))
	assert.LessOrEqual(t, len(big.ack.Remote), console.MaxOperatorLen+len("…"))
	assert.LessOrEqual(t, len(big.ack.Reason), console.MaxReasonLen+len("…"))
	_, _, reason = summarise(big.entries)
	assert.LessOrEqual(t, len(reason), maxConsoleReason+len("…"))
}
