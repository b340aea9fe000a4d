package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// restoredSummary is what the console shows of a fault only the audit file
// of an earlier life knows: the record itself (summary, evidence, job,
// rank) is in the log backend under its fault.id.
const restoredSummary = "restored from the remediation audit after a restart: the evidence is in the fault record (logs, by fault.id)"

// maxRestoredEntries bounds the audit entries kept per restored fault:
// those of its weightiest decision, as summarise reads them.
const maxRestoredEntries = 16

// restoredFault is one fault of an earlier life's audit, as the console
// will show it.
type restoredFault struct {
	recent      recentFault
	first, last time.Time // of the fault's first and newest entry
	entries     []audit.Entry
	ack         *console.Acknowledgement
}

// restoredFaults collects, while the audit file is replayed, the faults an
// earlier life showed the console, so that a restart loses neither them
// nor their acknowledgements. Bounded as recentFaults.
type restoredFaults struct {
	fifoIndex[*restoredFault]
}

func newRestoredFaults() *restoredFaults {
	return &restoredFaults{newFIFOIndex[*restoredFault](maxRecentFaults)}
}

// add takes one audit entry of an earlier life.
func (r *restoredFaults) add(entry audit.Entry) {
	// A fault id is 16 hex digits; one that is not even a name's length is
	// no fault's (the audit line was written by hand or cut).
	if entry.FaultID == "" || len(entry.FaultID) > maxRestoredNameLen || entry.Step == stepBreaker {
		return
	}
	f, ok := r.byID[entry.FaultID]
	if !ok {
		f = &restoredFault{first: entry.Time}
		r.put(entry.FaultID, f)
	}
	f.last = entry.Time
	// Each entry names the fault as it stood when written: the newest
	// says what it is now.
	if entry.FaultType != "" {
		f.recent.typ = clip(entry.FaultType, maxRestoredNameLen)
	}
	if entry.Severity != "" {
		f.recent.severity = clip(entry.Severity, maxRestoredNameLen)
	}
	if entry.State != "" {
		f.recent.state = clip(entry.State, maxRestoredNameLen)
	}
	if entry.Node != "" {
		f.recent.node = clip(entry.Node, maxRestoredNameLen)
	}
	if entry.Step == stepAcknowledge {
		if f.ack == nil && entry.Decision == audit.DecisionActed {
			f.ack = &console.Acknowledgement{By: clip(entry.Operator, console.MaxOperatorLen),
				Remote: clip(entry.OperatorRemote, console.MaxOperatorLen),
				Reason: clip(entry.OperatorReason, console.MaxReasonLen), Time: entry.Time}
		}
		return
	}
	// Keep the entries of the weightiest decision only: summarise shows
	// no other.
	switch rank, best := decisionRank[entry.Decision], bestRank(f.entries); {
	case rank > best:
		f.entries = append(f.entries[:0], summaryEntry(entry))
	case rank == best && len(f.entries) < maxRestoredEntries:
		f.entries = append(f.entries, summaryEntry(entry))
	}
}

const (
	// maxRestoredActions bounds the action names kept of one entry.
	maxRestoredActions = 8
	// maxRestoredNameLen bounds a restored name: an action ("cordon"), a
	// node, a fault type, severity or state. Real ones are far shorter.
	maxRestoredNameLen = 256
)

// summaryEntry is what summarise reads of an entry, each field clipped: a
// line of the audit file may hold a whole webhook body (and up to
// audit.MaxLineBytes), and thousands of faults are restored. The reason
// is cut short of summarise's own bound, which then leaves it as it is.
func summaryEntry(entry audit.Entry) audit.Entry {
	actions := entry.Actions[:min(len(entry.Actions), maxRestoredActions)]
	out := audit.Entry{Step: entry.Step, Decision: entry.Decision, Actions: make([]string, len(actions)),
		Reason:  clip(entry.Reason, maxConsoleReason-len("…")),
		Outcome: clip(entry.Outcome, maxConsoleReason-len("…"))}
	for i, a := range actions {
		out.Actions[i] = clip(a, maxRestoredNameLen)
	}
	return out
}

func bestRank(entries []audit.Entry) int {
	if len(entries) == 0 {
		return 0
	}
	return decisionRank[entries[0].Decision]
}

// showRestored gives the console the faults of earlier lives, oldest
// first, and remembers them for acknowledgements. A fault whose record
// arrives again is then replaced by it (keeping its onset, decision and
// acknowledgement). Callers hold e.mu.
func (e *remediationExporter) showRestored() {
	r := e.restored
	e.restored = nil
	if r == nil || e.console == nil {
		return
	}
	for _, id := range r.order {
		rf := r.byID[id]
		e.recentFaults.put(id, rf.recent)
		f := console.Fault{ID: id, Type: rf.recent.typ, Severity: rf.recent.severity, State: console.StateOpen,
			Node: rf.recent.node, Rank: -1, Step: -1, FirstSeen: rf.first, LastSeen: rf.last,
			Summary: restoredSummary, Ack: rf.ack}
		if rf.recent.state == string(fault.StateResolved) {
			f.State = console.StateResolved
		}
		f.Decision, f.Action, f.Reason = summarise(rf.entries)
		e.console.RecordFault(f)
	}
}
