package fault

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Type names a kind of fault (docs/fault-record.md lists the meaning of each).
type Type string

// Fault types.
const (
	TypeStragglerCompute Type = "straggler.compute"
	TypeStragglerLink    Type = "straggler.link"
	TypeNVLinkDegraded   Type = "nvlink.degraded"
	TypeGPUMemoryDBE     Type = "gpu.memory.dbe"
	TypeGPUECCSBERate    Type = "gpu.ecc.sbe_rate"
	TypeGPUThermal       Type = "gpu.thermal"
	TypeGPUFellOffBus    Type = "gpu.fell_off_bus"
	TypeGPUUnresponsive  Type = "gpu.unresponsive"
	TypeGPUXID           Type = "gpu.xid" // the code is in Record.XID
	TypeIBLinkFlap       Type = "ib.link.flap"
	TypeNCCLHang         Type = "nccl.hang"
	TypeNCCLTimeout      Type = "nccl.timeout"
	TypeTrainingLossNaN  Type = "training.loss_nan"
	TypeNodeSilent       Type = "node.silent"
	// TypeGPUSyncWait is the §5 diagnosis "SM active low + GPU util high +
	// temperature normal": kernel-launch overhead or synchronisation waits.
	// A performance finding, not a hardware fault.
	TypeGPUSyncWait Type = "gpu.sync_wait"
	// TypeNodeRepeatedFaults escalates a node that keeps faulting.
	TypeNodeRepeatedFaults Type = "node.repeated_faults"
	// TypeJobSlowdown: a large share of a job's ranks (more than the
	// straggler processor's max_slow_share of a group) slow at once, or a
	// job whose ranks run at two stable levels. A finding about the job,
	// not a node to take out.
	TypeJobSlowdown Type = "job.slowdown"
	// TypeGPUPCIeDegraded: DCGM's PCIe health watch saw replays above its
	// rate (the link retransmits: a riser, cable or slot going bad).
	TypeGPUPCIeDegraded Type = "gpu.pcie.degraded"
	// TypeGPUPower: DCGM's power health watch saw the clocks held to the
	// power limit, or the power reading lost.
	TypeGPUPower Type = "gpu.power"
	// TypeGPUInforom: DCGM's inforom health watch found the GPU's inforom
	// (its on-board configuration and error-record store) corrupt.
	TypeGPUInforom Type = "gpu.inforom"
)

// Types lists every fault type in the order docs/fault-record.md lists them.
func Types() []Type {
	return []Type{TypeStragglerCompute, TypeStragglerLink, TypeNVLinkDegraded, TypeGPUMemoryDBE,
		TypeGPUECCSBERate, TypeGPUThermal, TypeGPUFellOffBus, TypeGPUUnresponsive, TypeGPUXID,
		TypeIBLinkFlap, TypeNCCLHang, TypeNCCLTimeout, TypeTrainingLossNaN, TypeNodeSilent, TypeGPUSyncWait, TypeNodeRepeatedFaults, TypeJobSlowdown,
		TypeGPUPCIeDegraded, TypeGPUPower, TypeGPUInforom}
}

// Valid reports whether t is a known fault type.
func (t Type) Valid() bool {
	for _, k := range Types() {
		if t == k {
			return true
		}
	}
	return false
}

// State is the lifecycle step a record reports.
type State string

// Fault states.
const (
	StateOpen     State = "open"
	StateUpdate   State = "update"
	StateResolved State = "resolved"
)

// Valid reports whether s is a known state.
func (s State) Valid() bool { return s == StateOpen || s == StateUpdate || s == StateResolved }

// Severity is the alert routing class: P1 pages within 15 min, P2 goes to
// chat within 1 h, P3 is shown on dashboards, P4 is recorded only.
type Severity string

// Severities.
const (
	SeverityP1 Severity = "P1"
	SeverityP2 Severity = "P2"
	SeverityP3 Severity = "P3"
	SeverityP4 Severity = "P4"
)

// Valid reports whether s is P1..P4.
func (s Severity) Valid() bool {
	return s == SeverityP1 || s == SeverityP2 || s == SeverityP3 || s == SeverityP4
}

// Action is the recommended remediation.
type Action string

// Actions.
const (
	ActionNone       Action = "none"
	ActionRestartApp Action = "restart_app"
	ActionResetGPU   Action = "reset_gpu"
	ActionCordon     Action = "cordon"
	ActionDrain      Action = "drain"
	ActionRMAReview  Action = "rma_review"
)

// Valid reports whether a is a known action.
func (a Action) Valid() bool {
	switch a {
	case ActionNone, ActionRestartApp, ActionResetGPU, ActionCordon, ActionDrain, ActionRMAReview:
		return true
	}
	return false
}

// BlastRadius is the smallest unit the action has to isolate.
type BlastRadius string

// Blast radii.
const (
	BlastGPU          BlastRadius = "gpu"
	BlastNode         BlastRadius = "node"
	BlastNVLinkDomain BlastRadius = "nvlink_domain"
)

// Valid reports whether b is a known blast radius.
func (b BlastRadius) Valid() bool { return b == BlastGPU || b == BlastNode || b == BlastNVLinkDomain }

// EntityKind is what a fault is about.
type EntityKind string

// Entity kinds.
const (
	EntityGPU          EntityKind = "gpu"
	EntityNode         EntityKind = "node"
	EntityNVLinkDomain EntityKind = "nvlink_domain"
	EntityIBPort       EntityKind = "ib_port"
	EntityRank         EntityKind = "rank"
	EntityJob          EntityKind = "job"
)

// Valid reports whether k is a known entity kind.
func (k EntityKind) Valid() bool {
	switch k {
	case EntityGPU, EntityNode, EntityNVLinkDomain, EntityIBPort, EntityRank, EntityJob:
		return true
	}
	return false
}

// Entity identifies one GPU, node, NVLink domain, IB port, rank or job. Key
// conventions (docs/fault-record.md): gpu: the GPU UUID; node and
// nvlink_domain: host.name; ib_port: host/device/port; rank: job/rank; job:
// training.job.id.
type Entity struct {
	Kind EntityKind
	Key  string
}

// String is the entity as it appears in fault.entity and in the fault id.
func (e Entity) String() string { return string(e.Kind) + ":" + e.Key }

// Evidence is one signal reading that supports a fault.
type Evidence struct {
	Signal string  // metric, log attribute or span attribute, see docs/fault-record.md
	Value  float64 // numeric reading (or the aggregate the rule tested)
	Text   string  // text reading, e.g. a straggler verdict; empty for numbers
	// Time is when the reading was taken (the data's own timestamp: a
	// span's end, a data point's or log record's timestamp).
	Time time.Time
	// ObservedAt is when the correlator placed the reading in its rule
	// windows, where that is not Time: the gateway places the readings of
	// spans (straggler verdicts, step spans, timed-out collectives) at
	// their arrival, so that a verdict delayed by consumer lag or a node
	// clock that is off still falls in its rule's window. Zero otherwise.
	ObservedAt time.Time
	TraceID    pcommon.TraceID // empty when the signal is not from a span
	SpanID     pcommon.SpanID
}

// Record is one fault record. One fault yields a sequence of records with the
// same ID: open, zero or more updates, resolved.
type Record struct {
	ID          string
	Type        Type
	XID         int // the XID code for gpu.xid faults (and XID-driven rules); 0 when none
	State       State
	Severity    Severity
	Confidence  float64 // 0..1
	Rule        string
	Action      Action
	BlastRadius BlastRadius
	Entity      Entity
	HostName    string
	GPUUUID     string
	JobID       string
	Rank        int64
	RankKnown   bool
	FirstSeen   time.Time // onset: the earliest evidence; fixed for the life of the fault
	LastSeen    time.Time
	// PresentAtStart: the fault was already there in the first reading of
	// its series (a volatile DBE count above zero, an XID, a failed row
	// remap, a hung GPU on the agent's first scrape), not seen happening.
	// FirstSeen is then the start of that series (the agent's start), so
	// that every correlator that reads the same series agrees on the id.
	PresentAtStart bool
	Summary        string // human sentence, the log body
	Evidence       []Evidence
}

// DefaultBucket is the onset bucket of fault ids: two detections of the same
// fault type on the same entity whose onsets fall in one bucket are one fault.
const DefaultBucket = 5 * time.Minute

// ID returns the fault id: the first 8 bytes (16 hex digits) of
// SHA-256("<type>\x00<entity>\x00<bucket start in Unix seconds, decimal>"),
// where the bucket start is onset floored to a multiple of bucket counted
// from the Unix epoch (UTC, so time zones do not matter). bucket <= 0 uses
// the onset itself, to the nanosecond. Replicas and replays that see the same
// onset compute the same id.
func ID(faultType, entity string, onset time.Time, bucket time.Duration) string {
	ns := onset.UnixNano()
	var start string
	if bucket > 0 {
		b := int64(bucket)
		floor := ns - ((ns%b)+b)%b // floor, also for onsets before 1970
		if b%int64(time.Second) == 0 {
			start = strconv.FormatInt(floor/int64(time.Second), 10)
		} else {
			start = strconv.FormatInt(floor, 10) + "ns"
		}
	} else {
		start = strconv.FormatInt(ns, 10) + "ns"
	}
	sum := sha256.Sum256([]byte(faultType + "\x00" + entity + "\x00" + start))
	return hex.EncodeToString(sum[:8])
}

// IDType is the type string hashed into the id: the type, with the XID code
// appended for gpu.xid ("gpu.xid.13") so that two XIDs on one GPU are two
// faults.
func (r Record) IDType() string {
	if r.Type == TypeGPUXID && r.XID != 0 {
		return string(r.Type) + "." + strconv.Itoa(r.XID)
	}
	return string(r.Type)
}

// ComputeID returns ID(r.IDType(), r.Entity.String(), r.FirstSeen, bucket).
func (r Record) ComputeID(bucket time.Duration) string {
	return ID(r.IDType(), r.Entity.String(), r.FirstSeen, bucket)
}
