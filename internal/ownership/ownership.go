// Package ownership is the seam between the gpu_faults receiver, whose
// single-owner consumer group elects the one gateway replica that acts on
// faults, and the components that must act only there: the remediation
// exporter (and, through it, the fault console). The receiver knows
// whether it holds the partitions and, from the group's assignment, which
// member does; the exporter reads that through Election.
//
// Receivers cannot be found through component.Host, so the receiver
// registers its Election here when it is created and withdraws it at
// Shutdown; the collector creates every component of its pipelines before
// it starts any, so the exporter finds it at Start (Find).
package ownership // import "github.com/otelcol-gpu/otelcol-gpu/internal/ownership"

import (
	"fmt"
	"sort"
	"strings"
	"sync"
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

var (
	mu        sync.Mutex
	elections = map[string]Election{}
)

// Register offers e under id (the receiver's component ID) until the
// returned func withdraws it. A second registration under the same id
// replaces the first (a collector that rebuilt its pipelines).
func Register(id string, e Election) (unregister func()) {
	mu.Lock()
	defer mu.Unlock()
	elections[id] = e
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if elections[id] == e {
			delete(elections, id)
		}
	}
}

// Find returns the one Election registered in this process and its id; nil
// when none is (no gpu_faults receiver: one replica acts alone). More than
// one is an error naming them: which group elects the acting replica would
// be ambiguous.
func Find() (string, Election, error) {
	mu.Lock()
	defer mu.Unlock()
	switch len(elections) {
	case 0:
		return "", nil, nil
	case 1:
		for id, e := range elections {
			return id, e, nil
		}
	}
	ids := make([]string, 0, len(elections))
	for id := range elections {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return "", nil, fmt.Errorf("%d gpu_faults receivers in this collector (%s): one consumer group must elect the replica that acts", len(ids), strings.Join(ids, ", "))
}
