package lifecycle

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Release is a node's return to service.
type Release struct {
	Node string
	// FaultIDs are the resolved faults of ours it lets go of, sorted; empty
	// for a cancelled release.
	FaultIDs []string
	// Actions are the node actions the exporter holds on the node.
	Actions []actuator.Action
}

// ReleaseDecision is what a resolution means for its node's quarantine.
// Neither Schedule nor Skip: nothing to say (the node is not ours, or a
// fault of ours is still open, or the release is already pending).
type ReleaseDecision struct {
	// Schedule: start the verification window, then BeginRelease.
	Schedule bool
	// Skip says why the node stays quarantined; Rail names the rail that
	// keeps it (RailHold, RailPolicy, RailOpenFaults).
	Skip    string
	Rail    string
	Release Release
}

// Resolution is what a resolved record of a fault decided.
type Resolution struct {
	// Skip says why the record does nothing (out of order, duplicate).
	Skip string
	// Node is the fault's node ("" when it names none).
	Node string
	// Webhooked: a webhook went out for the fault, so its resolution goes
	// out too.
	Webhooked bool
	Release   ReleaseDecision
}

// Resolve records that fault id, on node, resolved at now.
func (s *State) Resolve(id, node string, now time.Time) Resolution {
	fs := s.faults[id]
	if fs == nil {
		// Resolved before its open arrived: remember it, so the late open
		// does nothing.
		s.faults[id] = &faultState{node: node, resolved: true, lastRecord: now}
		return Resolution{Skip: "resolved before any open record (out of order): nothing to undo"}
	}
	if fs.resolved {
		return Resolution{Skip: "duplicate: fault already resolved"}
	}
	fs.resolved = true
	fs.lastRecord = now
	res := Resolution{Node: fs.node, Webhooked: fs.webhooked}
	if n := s.nodes[fs.node]; fs.node != "" && n != nil {
		delete(n.openFaults, id)
		res.Release = s.decideRelease(fs.node, n)
	}
	return res
}

// decideRelease schedules the return to service of a node whose faults are
// all resolved, where every fault it was quarantined for allows it and
// none waits for a human.
func (s *State) decideRelease(name string, n *nodeState) ReleaseDecision {
	if len(n.ourFaults) == 0 {
		return ReleaseDecision{}
	}
	d := ReleaseDecision{Release: Release{Node: name, Actions: slices.Clone(n.actions)}}
	if n.repair != nil && n.repair.Step != repair.StepRMA {
		d.Skip, d.Rail = "in the repair loop ("+string(n.repair.Step)+"): returns to service once repaired and verified", RailRepair
		return d
	}
	if n.hold != "" {
		d.Skip, d.Rail = "waits for a human: "+n.hold, RailHold
		return d
	}
	ids := make([]string, 0, len(n.ourFaults))
	for id := range n.ourFaults {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if fs := s.faults[id]; fs == nil || !fs.release {
			d.Skip, d.Rail = "the policy does not return the node to service after fault "+id, RailPolicy
			return d
		}
	}
	if len(n.openFaults) > 0 {
		d.Skip, d.Rail = fmt.Sprintf("node has %d other open fault(s)", len(n.openFaults)), RailOpenFaults
		return d
	}
	for _, id := range ids {
		if !s.faults[id].resolved {
			return ReleaseDecision{} // an update of ours still open (kept out of openFaults only when its node changed)
		}
	}
	if n.releasePending {
		return ReleaseDecision{}
	}
	n.releasePending, n.releaseFaults = true, ids
	d.Schedule, d.Release.FaultIDs = true, slices.Clone(ids)
	return d
}

// OpenOnNode counts fault id as open on node, acted on or not. A fault
// that opens during the verification window cancels the node's return to
// service; the cancelled release is returned.
func (s *State) OpenOnNode(node, id string) (cancelled Release, ok bool) {
	s.node(node).openFaults[id] = struct{}{}
	return s.CancelRelease(node)
}

// CancelRelease drops node's pending return to service, if any: the node
// stays quarantined.
func (s *State) CancelRelease(node string) (cancelled Release, ok bool) {
	n := s.nodes[node]
	if n == nil || !n.releasePending {
		return Release{}, false
	}
	n.releasePending = false
	return Release{Node: node, Actions: slices.Clone(n.actions)}, true
}

// BeginRelease ends node's verification window: it returns the release to
// make, or false when none is pending any more (cancelled meanwhile).
// Until Released, the node stays quarantined by the exporter.
func (s *State) BeginRelease(node string) (Release, bool) {
	n := s.nodes[node]
	if n == nil || !n.releasePending {
		return Release{}, false
	}
	n.releasePending = false
	return Release{Node: node, FaultIDs: slices.Clone(n.releaseFaults), Actions: slices.Clone(n.actions)}, true
}

// Released forgets node's quarantine: returned to service at `at` (which
// starts the cooldown), or no longer the exporter's (a human took over).
func (s *State) Released(node string, at time.Time) {
	n := s.node(node)
	for id := range n.ourFaults {
		if fs := s.faults[id]; fs != nil {
			fs.ours = false
		}
	}
	n.ourFaults = map[string]struct{}{}
	n.actions = nil
	n.releaseFaults = nil
	n.since = time.Time{}
	n.repair = nil
	n.lastRelease = at
}

// BeginManualRelease is a human's release of node: every fault the
// exporter holds it for, open or resolved, goes with it. It returns false
// when the exporter does not hold the node. Nothing changes until
// Released (a pending verification window stays until then).
func (s *State) BeginManualRelease(node string) (Release, bool) {
	n := s.nodes[node]
	if n == nil || len(n.ourFaults) == 0 {
		return Release{}, false
	}
	return Release{Node: node, FaultIDs: sortedKeys(n.ourFaults), Actions: slices.Clone(n.actions)}, true
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
