package actuator

import (
	"context"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// RepairRequest names a repair a platform carries out on a node the
// exporter holds quarantined for a confirmed fault.
type RepairRequest struct {
	Node    string
	GPUUUID string // the GPU of a gpu_reset
	FaultID string // the fault the repair is for; with Action and Attempt, the idempotency key
	// Attempt counts the repairs of this node's loop (1 for the first): a
	// second reboot after a failed verification is a new object, not the
	// first one found again.
	Attempt   int
	FaultType string
	Action    repair.Action
	// Reason is the human text (Slurm Reason, the object's annotation); the
	// platform adds its ownership prefix.
	Reason string
	// Requested is when the exporter decided it (a reboot is done once the
	// node booted after this).
	Requested time.Time
}

// RepairState is how a repair the platform carries out is going.
type RepairState string

// Repair states. Done and Failed are final.
const (
	RepairPending RepairState = "pending" // requested, not carried out yet
	RepairDone    RepairState = "done"    // the platform says it was carried out
	RepairFailed  RepairState = "failed"  // the platform says it failed
	// RepairUnknown: the platform cannot say (a generic webhook): the
	// exporter learns the outcome from the node's agent (a new boot id).
	RepairUnknown RepairState = "unknown"
)

// RepairProgress is a platform's answer about a repair it carries out.
type RepairProgress struct {
	State  RepairState
	Detail string
}

// Repairer is a platform that can carry out repairs (Slurm's scontrol
// reboot; Kubernetes RebootNode/GPUReset objects for NVSentinel's janitor).
// The exporter asks for a repair only on a node it holds quarantined, after
// its rails (dry run, ownership, repair breaker) admitted it.
type Repairer interface {
	// Repairs lists the repair actions this platform carries out itself.
	Repairs() []repair.Action
	// StartRepair requests req.Action on req.Node. Idempotent: a request
	// already made (same fault, action and attempt) is AlreadyDone; a node
	// that is not quarantined by this exporter is NotOurs and untouched.
	StartRepair(ctx context.Context, req RepairRequest) (Result, error)
	// RepairStatus reads how the repair req asked for goes.
	RepairStatus(ctx context.Context, req RepairRequest) (RepairProgress, error)
	// Drained reports whether no workload is left on the node (Slurm: no
	// job allocated, DRAINED rather than DRAINING; Kubernetes: no pod but
	// DaemonSet pods and the node's own). detail says what still runs.
	Drained(ctx context.Context, node string) (drained bool, detail string, err error)
}
