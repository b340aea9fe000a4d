// Package ownership is the seam between the gpu_faults receiver, whose
// single-owner consumer group elects the one gateway replica that acts on
// faults, and the components that must act only there: the remediation
// exporter (and, through it, the fault console). The receiver knows
// whether it holds the partitions and, from the group's assignment, which
// member does; the exporter reads that through Election.
//
// Receivers cannot be found through component.Host, so the election goes
// through an extension the collector provides (extension/electionextension,
// type "election"): the receiver offers its Election to it at Start and
// withdraws it at Shutdown, and the exporter follows it from its own Start
// (the collector starts extensions first, exporters before receivers, so
// the exporter sees "electing" until the receiver has offered). Both find
// the one extension of that type through host.GetExtensions (FromHost);
// nothing is kept in process-global state.
package ownership // import "github.com/otelcol-gpu/otelcol-gpu/internal/ownership"

import (
	"fmt"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/component"
)

// Role is a replica's place in the election.
type Role string

const (
	// RoleOwner: this replica holds the partitions and acts.
	RoleOwner Role = "owner"
	// RoleStandby: another member holds them; this replica never acts.
	RoleStandby Role = "standby"
	// RoleElecting: not in the group yet, or between a revocation and the
	// next assignment; this replica does not act.
	RoleElecting Role = "electing"
)

// Bounds of what a member advertises (the receiver's config refuses more).
const (
	MaxNameLen    = 253
	MaxConsoleLen = 2048
)

// Member names a replica in the election.
type Member struct {
	// Name is the replica's name: the gpu_faults receiver's member_name
	// (in Kubernetes the StatefulSet pod name).
	Name string `json:"name"`
	// Console is the URL of its fault console, as it advertises it (""
	// none).
	Console string `json:"console,omitempty"`
}

// String is the member's name, with its console when it advertises one.
func (m Member) String() string {
	if m.Console == "" {
		return m.Name
	}
	return m.Name + " (" + m.Console + ")"
}

// Status is what the receiver knows of the election now.
type Status struct {
	Role Role
	// Self is this replica.
	Self Member
	// Owner is the member holding the partitions: Self when this replica
	// owns them, else as the group's last assignment named it (zero when
	// unknown: electing, or a group leader of an earlier version).
	Owner Member
	// Group is the consumer group, Generation the one last joined.
	Group      string
	Generation int32
}

// Election is what the gpu_faults receiver offers: its status, safe for
// concurrent use and never blocking on the network.
type Election interface {
	Status() Status
}

// ExtensionType is the type of the extension that offers a Seam
// (extension/electionextension).
const ExtensionType = "election"

// Seam is what the election extension offers: one gpu_faults receiver's
// election, read by the components that act only on the owner.
type Seam interface {
	// Offer binds receiver's election e until withdraw is called. An
	// error when another receiver's is bound: one consumer group elects
	// the replica that acts.
	Offer(receiver component.ID, e Election) (withdraw func(), err error)
	// Follow is the election as reader (the component acting on it) sees
	// it: the bound receiver's status, electing while none is bound. The
	// extension refuses to let the collector run a reader without a
	// receiver (it would never act).
	Follow(reader component.ID) Election
}

// FromHost returns the one election extension among host's extensions and
// its ID; a nil Seam when there is none. Several is an error naming them:
// which one elects would be ambiguous.
func FromHost(host component.Host) (component.ID, Seam, error) {
	var ids []component.ID
	for id := range host.GetExtensions() {
		if id.Type().String() == ExtensionType {
			ids = append(ids, id)
		}
	}
	switch len(ids) {
	case 0:
		return component.ID{}, nil, nil
	case 1:
		ext := host.GetExtensions()[ids[0]]
		seam, ok := ext.(Seam)
		if !ok {
			return component.ID{}, nil, fmt.Errorf("extension %q (%T) is not the election extension", ids[0], ext)
		}
		return ids[0], seam, nil
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.String()
	}
	sort.Strings(names)
	return component.ID{}, nil, fmt.Errorf("%d election extensions in service::extensions (%s): one gpu_faults consumer group elects the replica that acts; keep one", len(ids), strings.Join(names, ", "))
}
