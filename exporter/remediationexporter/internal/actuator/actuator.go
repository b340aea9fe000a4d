// Package actuator is the seam between the remediation exporter's decision
// logic (policy, dry-run, idempotency, cooldown, audit) and the platforms
// that act on a node: Kubernetes and Slurm. A platform implements Platform;
// the exporter never talks to an API server or scontrol itself.
//
// Every platform keeps three promises:
//   - it never undoes or overwrites what another writer did: a node
//     cordoned, tainted or drained by someone else is reported as
//     SkipForeign and left alone, and updates are made against the version
//     read (optimistic concurrency, retried on conflict), never as a blind
//     replace of a whole list;
//   - it marks what it did as its own (Kubernetes labels and annotations,
//     the Slurm reason prefix), and Release undoes only that;
//   - the quarantine budget (Breaker) lives in the platform itself (a
//     ConfigMap updated by compare-and-swap, or recounted from sinfo), so a
//     restart or a second replica cannot exceed it;
//   - Check says, before the breaker is asked, whether a node may be
//     quarantined at all (it exists, has a GPU, is not excluded and not
//     someone else's) and how many GPU nodes carry our marks, read from the
//     platform itself, so a forged fault naming a ghost node spends nothing.
package actuator // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"

import (
	"context"
	"errors"
	"time"
)

// Action is one thing a platform can do to a node.
type Action string

// Actions. Which ones a fault gets is the exporter's policy.
const (
	ActionCordon    Action = "cordon"    // Kubernetes spec.unschedulable; Slurm: DRAIN
	ActionTaint     Action = "taint"     // Kubernetes taint <key>=<fault type>
	ActionCondition Action = "condition" // Kubernetes node condition (e.g. GPUHealthy=False)
	ActionEvict     Action = "evict"     // Kubernetes: evict the pods using the faulty GPU
	ActionDrain     Action = "drain"     // Slurm State=DRAIN (running jobs finish)
	// ActionDeviceTaint taints one GPU (Kubernetes DRA DeviceTaintRule)
	// instead of the whole node; the platform falls back to cordon and
	// taint where it cannot.
	ActionDeviceTaint Action = "device_taint"
)

// Request names the node and the fault an action is for.
type Request struct {
	Node    string // Kubernetes node name or Slurm NodeName (host.name)
	GPUUUID string // the faulty GPU, when the fault has one
	FaultID string // fault.id: the idempotency key
	// FaultIDs, on Release from the exporter, are every fault this exporter
	// holds the node for, all resolved: the platform lets go of each of
	// them. A node may have been quarantined under any one of them (Slurm
	// names only the first in its drain reason). Empty: FaultID alone.
	FaultIDs  []string
	FaultType string // fault.type
	Severity  string // P1..P4
	// Reason is the human text (Slurm Reason, condition message); the
	// platform adds its ownership prefix.
	Reason  string
	Actions []Action
}

// ReleaseIDs is the set of fault ids a Release lets go of: FaultIDs, or
// FaultID when FaultIDs is empty; nil means every fault (a human's release).
func (r Request) ReleaseIDs() []string {
	if len(r.FaultIDs) > 0 {
		return r.FaultIDs
	}
	if r.FaultID != "" {
		return []string{r.FaultID}
	}
	return nil
}

// Outcome says what a platform call did.
type Outcome string

// Outcomes.
const (
	Applied      Outcome = "applied"        // changed the node
	AlreadyDone  Outcome = "already_done"   // this exporter had already done it (same fault or another of ours)
	SkipForeign  Outcome = "skip_foreign"   // someone else cordoned/drained/tainted it: left alone
	SkipExcluded Outcome = "skip_excluded"  // maintenance label or reservation
	SkipNotFound Outcome = "skip_not_found" // no such node
	SkipNoGPU    Outcome = "skip_no_gpu"    // the node has no GPU (a control-plane or CPU node)
	NotOurs      Outcome = "not_ours"       // Release: the quarantine is not this exporter's
)

// Result is the outcome of one call, with a short detail for the audit.
type Result struct {
	Outcome Outcome
	Detail  string
}

// Eligibility is a platform's answer to Check: whether a node may be
// quarantined, and how many GPU nodes are quarantined by this exporter.
type Eligibility struct {
	// Skip, when set, is why the node is left alone: SkipNotFound,
	// SkipNoGPU, SkipExcluded or SkipForeign; Detail says more.
	Skip   Outcome
	Detail string
	// Ours: the node already carries this exporter's quarantine marks, so
	// quarantining it again adds nothing to Quarantined.
	Ours bool
	// GPUNodes is how many GPU nodes the platform has (those the shares
	// are taken of); Quarantined how many nodes among them carry this
	// exporter's quarantine marks. Both are read from the platform, so they
	// hold across restarts and replicas.
	GPUNodes    int
	Quarantined int
}

// Platform acts on nodes. Implementations are safe for concurrent use.
type Platform interface {
	// Name is "kubernetes" or "slurm".
	Name() string
	// Check reads, and changes nothing: the exporter calls it before the
	// breaker, so a node it would skip never takes a slot. An error (the
	// platform cannot be read) means: do not act.
	Check(ctx context.Context, req Request) (Eligibility, error)
	// Quarantine applies req.Actions to req.Node. A transient error (API
	// server down) is returned as an error and the exporter retries.
	Quarantine(ctx context.Context, req Request) (Result, error)
	// Release undoes what this exporter did for the node (uncordon, remove
	// its taint, reset the condition, State=RESUME) and nothing else.
	Release(ctx context.Context, req Request) (Result, error)
	// Breaker is the platform's cluster-wide quarantine budget.
	Breaker() Breaker
}

// Breaker bounds how many nodes this exporter quarantines within a window.
// Its state lives in the platform, so every replica and restart shares it.
type Breaker interface {
	// Admit records node as quarantined at now if the budget allows and
	// returns true; returns false once the budget is spent, and from then on
	// the breaker is tripped (Tripped) until Reset. A node already counted
	// within the window is admitted again without counting twice.
	Admit(ctx context.Context, node string, now time.Time) (admitted bool, err error)
	// Refund gives back the slot Admit took for node at admittedAt when the
	// platform then left the node alone (a skip): a node never quarantined
	// must not spend the budget. An earlier admission of the node within
	// the window (another time) stays counted.
	Refund(ctx context.Context, node string, admittedAt time.Time) error
	// Tripped reports whether the breaker is tripped.
	Tripped(ctx context.Context) (bool, error)
	// Trip trips a closed breaker at now for a reason other than its own
	// budget (the exporter's quarantined-share cap refused a fault and an
	// operator must decide); detail says why and is what State reports.
	// tripped is false when the breaker was tripped already: the first
	// trip's time and detail stay.
	Trip(ctx context.Context, now time.Time, detail string) (tripped bool, err error)
	// Reset clears the tripped flag and the window (a human's action).
	Reset(ctx context.Context) error
	// State reads the breaker at now and changes nothing: for the fault
	// console.
	State(ctx context.Context, now time.Time) (BreakerState, error)
}

// BreakerState is what a breaker holds, as State read it.
type BreakerState struct {
	Tripped bool
	// TrippedAt and Detail: when and why it tripped (zero and "" when it
	// is not tripped, or the platform does not keep them).
	TrippedAt time.Time
	Detail    string
	// Used of Budget quarantines count within Window (Budget 0: unknown).
	Used   int
	Budget int
	Window time.Duration
}

// Leader says whether this replica is the one active remediator.
type Leader interface {
	IsLeader() bool
}

// ErrConflict is returned by platforms when optimistic concurrency retries
// ran out; the exporter retries the whole call later.
var ErrConflict = errors.New("actuator: the node kept changing under us")
