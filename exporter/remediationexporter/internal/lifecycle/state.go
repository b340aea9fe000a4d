package lifecycle

import (
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Retention of per-fault state: long enough to recognise redeliveries and
// late records of a fault, bounded so that state does not grow forever.
const (
	ResolvedRetention = 24 * time.Hour
	OpenRetention     = 7 * 24 * time.Hour
	// PruneEvery spaces the sweeps: fault records are rare, a sweep per
	// record would cost more than the state it frees.
	PruneEvery = time.Minute
)

// faultState is what the exporter remembers of one fault id.
type faultState struct {
	node       string
	resolved   bool
	severity   fault.Severity // the highest severity a webhook was sent for
	webhooked  bool
	applied    []actuator.Action // node actions done (or, in dry run, logged) for it
	ours       bool              // this exporter quarantined its node for it
	release    bool              // the policy lets it return the node to service
	lastRecord time.Time
}

// nodeState is what the exporter remembers of one node.
type nodeState struct {
	openFaults     map[string]struct{} // open faults seen on the node, acted on or not
	ourFaults      map[string]struct{} // faults it quarantined the node for
	actions        []actuator.Action   // node actions it holds on the node
	hold           string              // why the node waits for a human; never released automatically
	lastRelease    time.Time
	releasePending bool     // in its verification window
	releaseFaults  []string // the faults the pending release lets go of
	// since: when the exporter took the node (the record that made its
	// first fault of ours; zero once released).
	since time.Time
	// repair is the node's repair loop (repair.go); nil: none.
	repair *Loop
}

// State is the exporter's memory of faults and nodes. Not safe for
// concurrent use.
type State struct {
	cooldown  time.Duration
	faults    map[string]*faultState
	nodes     map[string]*nodeState
	lastPrune time.Time
}

// New returns the empty state. cooldown is how long a node returned to
// service is not quarantined again.
func New(cooldown time.Duration) *State {
	return &State{cooldown: cooldown, faults: map[string]*faultState{}, nodes: map[string]*nodeState{}}
}

// Rails of the state that refuse a quarantine or keep a node quarantined
// (the exporter's decision telemetry names them).
const (
	RailCooldown   = "cooldown"    // returned to service too recently
	RailHold       = "hold"        // the node waits for a human
	RailPolicy     = "policy"      // a fault's rule does not return the node to service
	RailOpenFaults = "open_faults" // other faults are open on the node
)

// QuarantinedNodes is the number of nodes the exporter holds quarantined
// (in a dry run, the nodes it would hold), releases pending included.
func (s *State) QuarantinedNodes() int {
	n := 0
	for _, ns := range s.nodes {
		if len(ns.ourFaults) > 0 {
			n++
		}
	}
	return n
}

// Faults is the number of fault ids remembered.
func (s *State) Faults() int { return len(s.faults) }

// node is the state of a node, created when missing.
func (s *State) node(name string) *nodeState {
	n := s.nodes[name]
	if n == nil {
		n = &nodeState{openFaults: map[string]struct{}{}, ourFaults: map[string]struct{}{}}
		s.nodes[name] = n
	}
	return n
}

// Prune forgets faults long past and idle nodes, so state stays bounded.
// It sweeps at most once per PruneEvery.
func (s *State) Prune(now time.Time) {
	if now.Sub(s.lastPrune) < PruneEvery {
		return
	}
	s.lastPrune = now
	for id, fs := range s.faults {
		if fs.ours {
			continue // still holds a node (open, in its verification window, or waiting for a human)
		}
		age := now.Sub(fs.lastRecord)
		if (fs.resolved && age > ResolvedRetention) || age > OpenRetention {
			delete(s.faults, id)
			if n := s.nodes[fs.node]; n != nil {
				delete(n.openFaults, id)
			}
		}
	}
	for name, n := range s.nodes {
		if len(n.openFaults) == 0 && len(n.ourFaults) == 0 && !n.releasePending && n.hold == "" &&
			now.Sub(n.lastRelease) > s.cooldown {
			delete(s.nodes, name)
		}
	}
}
