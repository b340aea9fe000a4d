package lifecycle

import (
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The Restore methods replay what an earlier life did, from its audit, at
// the time `at` it was done; node is the node the entry names ("" none).

// RestoreQuarantine replays the platform's final answer about actions on
// node for fault id, as Quarantined; held: the earlier life held them.
func (s *State) RestoreQuarantine(id, node string, actions []actuator.Action, held bool, at time.Time) {
	s.restored(id, node, at)
	// The audit does not say why a node was held; HoldQuarantined decides.
	s.Quarantined(id, node, actions, held, "")
}

// RestoreWebhook replays a webhook sent for fault id at severity sev.
func (s *State) RestoreWebhook(id, node string, sev fault.Severity, at time.Time) {
	fs := s.restored(id, node, at)
	if !fs.webhooked || higher(sev, fs.severity) {
		fs.severity = sev
	}
	fs.webhooked = true
}

// RestoreRelease replays node's return to service (or its quarantine
// becoming someone else's) at `at`.
func (s *State) RestoreRelease(node string, at time.Time) {
	s.Released(node, at)
}

// RestoreResolved replays that fault id was resolved.
func (s *State) RestoreResolved(id, node string, at time.Time) {
	s.restored(id, node, at).resolved = true
}

// HoldQuarantined keeps every node still quarantined after a replay for a
// human, with reason (unless it already waits for one, or its repair loop
// resumes), and returns how many there are. The audit does not say whether the policy allowed their
// return to service, nor which other faults were open on them.
func (s *State) HoldQuarantined(reason string) (held int) {
	for _, n := range s.nodes {
		if len(n.ourFaults) == 0 {
			continue
		}
		held++
		if n.repair != nil {
			continue // its repair loop resumes (or, in rma, holds it already)
		}
		if n.hold == "" {
			n.hold = reason
		}
	}
	return held
}

// restored is the state of fault id, created when missing, named after
// node (when set) and last seen no earlier than at.
func (s *State) restored(id, node string, at time.Time) *faultState {
	fs := s.faults[id]
	if fs == nil {
		fs = &faultState{}
		s.faults[id] = fs
	}
	if node != "" {
		fs.node = node
	}
	if at.After(fs.lastRecord) {
		fs.lastRecord = at
	}
	return fs
}
