package lifecycle

import (
	"slices"
	"sort"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// Holding is a node the exporter holds quarantined, as the fault console
// lists it. A copy: changing it changes nothing.
type Holding struct {
	Node string
	// FaultIDs are the faults it holds the node for, sorted.
	FaultIDs []string
	Actions  []actuator.Action
	// Reason says what keeps the node out of service.
	Reason string
	// Since is when the exporter took it (zero: unknown).
	Since time.Time
	// ReleasePending: every fault resolved, the verification window runs.
	ReleasePending bool
	// Repair is the node's repair loop; nil: none.
	Repair *Loop
}

// Holdings lists the nodes the exporter holds, by name.
func (s *State) Holdings() []Holding {
	out := make([]Holding, 0, len(s.nodes))
	for name, n := range s.nodes {
		if len(n.ourFaults) > 0 {
			out = append(out, s.holding(name, n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Holding returns node's holding; false when the exporter does not hold it.
func (s *State) Holding(node string) (Holding, bool) {
	n := s.nodes[node]
	if n == nil || len(n.ourFaults) == 0 {
		return Holding{}, false
	}
	return s.holding(node, n), true
}

// HasFault reports whether fault id is remembered (open or resolved).
func (s *State) HasFault(id string) bool {
	_, ok := s.faults[id]
	return ok
}

func (s *State) holding(name string, n *nodeState) Holding {
	h := Holding{Node: name, FaultIDs: sortedKeys(n.ourFaults), Actions: slices.Clone(n.actions), Since: n.since,
		ReleasePending: n.releasePending}
	h.Reason = s.holdReason(h.FaultIDs, n)
	if n.repair != nil {
		l := n.repair.copy()
		h.Repair = &l
	}
	return h
}

// holdReason says what keeps a held node out of service, as decideRelease
// would: a hold for a human, a rule that does not release, faults still
// open, or the verification window.
func (s *State) holdReason(ids []string, n *nodeState) string {
	if n.hold != "" {
		return "waits for a human: " + n.hold
	}
	if n.repair != nil {
		return "repair loop, " + string(n.repair.Step) + ": returns to service once repaired and verified"
	}
	for _, id := range ids {
		if fs := s.faults[id]; fs == nil || !fs.release {
			return "the policy does not return the node to service after fault " + id + ": a human releases it"
		}
	}
	if n.releasePending {
		return "every fault resolved: returns to service after the verification window"
	}
	return "returns to service once its faults resolve and the verification window passes"
}
