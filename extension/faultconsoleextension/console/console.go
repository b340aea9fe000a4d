// Package console is the seam between the fault console extension and the
// gateway components that feed it and act for it. The remediation exporter
// records every fault record it decided (with what it did) and attaches
// itself as the Controller that lists quarantined nodes, shows and resets
// the breaker, releases nodes and audits acknowledgements; the straggler
// processor records every rank's judged step for the heatmap. Both find the
// console through host.GetExtensions (FromHost), so the collector starts
// the extension before them and stops it after them.
package console // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// Console is what the fault console extension offers to other components.
// Every method is safe for concurrent use and never blocks on the network:
// a recording component must not wait for a browser.
type Console interface {
	// RecordFault records a fault record and what remediation did about it
	// (a later record of the same ID replaces the earlier one; a resolved
	// one closes it).
	RecordFault(f Fault)
	// RecordStep records one rank's step as the straggler processor judged
	// it.
	RecordStep(s Step)
	// Attach offers c's controls to the console; Detach withdraws them (on
	// the controller's shutdown). One controller at a time: a second
	// Attach replaces the first.
	Attach(c Controller)
	Detach(c Controller)
}

// Fault states.
const (
	StateOpen     = "open"
	StateResolved = "resolved"
)

// Fault is one fault as the console shows it.
type Fault struct {
	ID       string
	Type     string
	Severity string // P1..P4
	State    string // StateOpen or StateResolved
	Node     string
	GPU      string // UUID, when the fault names one
	Job      string
	Attempt  int64
	Rank     int64 // -1: no rank
	Step     int64 // -1: no step
	// FirstSeen is the fault's onset (data time); LastSeen the newest record.
	FirstSeen time.Time
	LastSeen  time.Time
	Summary   string
	// Evidence is the record's evidence as name → value, as the record
	// carries it (docs/fault-record.md).
	Evidence map[string]string
	// TraceID is the contract trace id (hex) of the step the fault cites,
	// "" when it cites none: the console links it to the trace backend.
	TraceID string
	// Decision and Action say what remediation did: Decision is the audit
	// decision (acted, dry_run, skipped, failed), Action the actions
	// ("cordon,taint") and Reason why.
	Decision string
	Action   string
	Reason   string
	// Ack is an acknowledgement an earlier life of the recording component
	// audited: a fault restored after a restart carries it. The console
	// keeps the first acknowledgement it holds for a fault; nil changes
	// nothing.
	Ack *Acknowledgement
}

// MaxOperatorLen and MaxReasonLen bound an operator's declared name and
// reason in bytes: the console refuses longer ones, and a component that
// restores an acknowledgement clips it to them.
const (
	MaxOperatorLen = 256
	MaxReasonLen   = 4096
)

// Acknowledgement is who acknowledged a fault, from where, why and when.
type Acknowledgement struct {
	By     string
	Remote string
	Reason string
	Time   time.Time
}

// Step is one rank's step as the straggler processor judged it.
type Step struct {
	Job     string
	Attempt int64
	Step    int64
	Rank    int64
	Node    string
	// Compute is the rank's own compute time in the step (what the
	// straggler test compares), Duration the whole step span.
	Compute  time.Duration
	Duration time.Duration
	// Verdict is the rank's straggler verdict in this step ("" none), Score
	// its score.
	Verdict string
	Score   float64
	// NoCommSplit says the job's step records cannot show a straggler:
	// backward includes the collective wait (no
	// training.phase.comm_wait_ns, no flight-recorder tail), so a much
	// slower rank looks only slightly slower. A property of the job: the
	// console keeps the newest step's.
	NoCommSplit bool
}

// Operator is who asked for a change through the console: Name as the
// client declared it (the token proves only that it holds the token),
// Remote its address, Reason its free text. A control a standby forwarded
// carries Via, the standby's name, and ForwardedFor, the caller's address
// as the standby saw it (Remote is then the standby's): declared by
// whoever holds the token, like Name.
type Operator struct {
	Name         string
	Remote       string
	Reason       string
	Via          string
	ForwardedFor string
}

// QuarantinedNode is a node remediation holds out of service.
type QuarantinedNode struct {
	Node     string
	FaultIDs []string
	Actions  []string
	Reason   string
	Since    time.Time
	// ReleasePending: every fault resolved, the verification window runs.
	ReleasePending bool
	// Lifecycle is where the node is in the repair loop (nil: the exporter
	// runs no repair loop for it).
	Lifecycle *Lifecycle
}

// Lifecycle is a quarantined node's place in the repair loop
// (docs/fault-record.md, "The repair loop").
type Lifecycle struct {
	// Step is the current step (internal/repair's Step names), Since when
	// the node entered it.
	Step  string
	Since time.Time
	// Repair is the repair action in flight or last done (gpu_reset,
	// reboot, rma; "" before the first), Attempt its number in the node's
	// loop (1 for the first repair).
	Repair  string
	Attempt int
	// History is every step the node went through, oldest first.
	History []LifecycleStep
	// Verifications are the verification results, oldest first.
	Verifications []Verification
}

// LifecycleStep is one step of a node's loop.
type LifecycleStep struct {
	Step   string
	At     time.Time
	Detail string
}

// Verification is one verification's result on the node.
type Verification struct {
	At     time.Time
	Checks string // e.g. "dcgm_diag level 2, links_steady 5m0s"
	Passed bool
	Detail string
}

// Breaker is the remediation breaker's state.
type Breaker struct {
	Tripped bool
	// Used of Budget quarantines within Window (Budget 0: unknown).
	Used    int
	Budget  int
	Window  time.Duration
	History []BreakerEvent
	// QuarantineCap is the quarantined-share cap's state (nil: not known,
	// as in a dry run): the console shows a banner while faults wait.
	QuarantineCap *QuarantineCap
}

// BreakerEvent is one change of the breaker: "tripped" or "reset".
type BreakerEvent struct {
	Time   time.Time
	Event  string
	By     string // the operator of a reset; "" for a trip
	Reason string
}

// ErrNoController is returned by the console's control endpoints while no
// controller is attached (no remediation exporter in this collector).
var ErrNoController = errors.New("no remediation exporter is attached to the console")

// Controller is what the remediation exporter offers the console. Every
// change passes the exporter's rails and is written to its audit file
// before it returns; dry run applies.
type Controller interface {
	// Quarantined lists the nodes held by this exporter.
	Quarantined(ctx context.Context) ([]QuarantinedNode, error)
	// Breaker reads the breaker's state from the platform.
	Breaker(ctx context.Context) (Breaker, error)
	// ResetBreaker resets a tripped breaker.
	ResetBreaker(ctx context.Context, op Operator) error
	// Release returns a node this exporter holds to service through the
	// same rails as an automatic release; detail says what was done.
	Release(ctx context.Context, node string, op Operator) (detail string, err error)
	// Acknowledge audits that op acknowledged the fault.
	Acknowledge(ctx context.Context, faultID string, op Operator) error
	// Role is this replica's place in the election of the one that acts;
	// it never blocks. ResetBreaker, Release and Acknowledge refuse with a
	// *NotOwnerError on any replica but the owner.
	Role() Role
}

// What elects the replica that acts (Role.Election).
const (
	// ElectionGPUFaults: the gpu_faults receiver's single-owner consumer
	// group; the member holding its partitions acts.
	ElectionGPUFaults = "gpu_faults"
	// ElectionLease: the remediation exporter's Kubernetes Lease.
	ElectionLease = "lease"
	// ElectionNone: nothing elects; this replica acts alone (always the
	// owner).
	ElectionNone = "none"
)

// Role is a controller's replica in the election of the one that acts.
type Role struct {
	// Election is ElectionGPUFaults, ElectionLease or ElectionNone.
	Election string
	ownership.Status
}

// NotOwnerError refuses a control on a replica that does not act: a
// standby (naming the owner when it is known) or one still electing.
type NotOwnerError struct {
	Role Role
}

func (e *NotOwnerError) Error() string {
	self := e.Role.Self.Name
	if self == "" {
		self = "this replica"
	}
	what := "gpu_faults"
	if e.Role.Election == ElectionLease {
		what = "the remediation Lease"
	}
	switch {
	case e.Role.Owner.Name != "" && e.Role.Owner.Console != "":
		return fmt.Sprintf("%s is a standby and never acts: %s owns %s and acts; send controls to its console %s", self, e.Role.Owner.Name, what, e.Role.Owner.Console)
	case e.Role.Owner.Name != "":
		return fmt.Sprintf("%s is a standby and never acts: %s owns %s and acts; send controls to its console", self, e.Role.Owner.Name, what)
	case e.Role.Role == ownership.RoleStandby:
		return fmt.Sprintf("%s is a standby and never acts: another replica owns %s (not named to this one); send controls to the owner's console", self, what)
	}
	return fmt.Sprintf("%s does not act: the election of the owner of %s is in progress; try again in a few seconds", self, what)
}

// FromHost returns the Console of the extension id.
func FromHost(host component.Host, id component.ID) (Console, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("extension %q is not configured: add it under extensions and service::extensions", id)
	}
	c, ok := ext.(Console)
	if !ok {
		return nil, fmt.Errorf("extension %q (%T) is not a faultconsole extension", id, ext)
	}
	return c, nil
}
