// Package consoleclient is the client of the fault console's JSON API and
// the API's wire types, shared by the extension (which serves them) and
// otelcol-gpu-ctl (which reads them).
package consoleclient // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"

import "time"

// Error is every error answer: {"error": "..."}. A control refused on a
// replica that does not act (409) also says its role and names the owner
// when it is known.
type Error struct {
	Error string  `json:"error"`
	Role  string  `json:"role,omitempty"`
	Owner *Member `json:"owner,omitempty"`
}

// Headers of a control a standby forwards to the owner (the console's
// forward setting). The owner audits HeaderForwardedBy (the standby's name)
// and HeaderForwardedFor (the caller's address as the standby saw it) with
// the operator; a control that carries HeaderForwardedBy is never
// forwarded again. The relayed answer carries HeaderForwardedTo, the
// owner's name. Like the operator's name, what a caller holding the token
// writes into them is declared, not proven.
const (
	HeaderForwardedBy  = "Otelcol-Gpu-Forwarded-By"
	HeaderForwardedFor = "Otelcol-Gpu-Forwarded-For"
	HeaderForwardedTo  = "Otelcol-Gpu-Forwarded-To"
)

// Member is a replica in the election of the one that acts: its name and
// the URL of its console, as it advertises them.
type Member struct {
	Name    string `json:"name"`
	Console string `json:"console,omitempty"`
}

// Status answers GET /api/v1/status.
type Status struct {
	Version            string    `json:"version"`
	Command            string    `json:"command"`
	Time               time.Time `json:"time"`
	ControllerAttached bool      `json:"controller_attached"`
	OpenFaults         int       `json:"open_faults"`
	ResolvedFaults     int       `json:"resolved_faults"`
	AcknowledgedFaults int       `json:"acknowledged_faults"`
	Jobs               int       `json:"jobs"`
	EvictedFaults      uint64    `json:"evicted_faults"`
	EvictedJobs        uint64    `json:"evicted_jobs"`
	DroppedSteps       uint64    `json:"dropped_steps"`
	TraceLinks         bool      `json:"trace_links"`
	LogsLinks          bool      `json:"logs_links"`
	// Role is this replica's: owner (its controls act), standby (they are
	// refused: Owner acts) or electing; "" without a controller. Election
	// is what elects: gpu_faults, lease or none (a single replica).
	Role     string  `json:"role,omitempty"`
	Election string  `json:"election,omitempty"`
	Self     *Member `json:"self,omitempty"`
	Owner    *Member `json:"owner,omitempty"`
	// ForwardsControls: on a standby, controls are forwarded to the
	// owner's console (and its answer relayed) instead of refused.
	ForwardsControls bool `json:"forwards_controls,omitempty"`
}

// Role values of Status and Error.
const (
	RoleOwner    = "owner"
	RoleStandby  = "standby"
	RoleElecting = "electing"
)

// Links are a fault's links into the trace and log backends ("" when not
// configured or not applicable).
type Links struct {
	Trace string `json:"trace,omitempty"`
	Logs  string `json:"logs,omitempty"`
}

// Ack is an acknowledgement.
type Ack struct {
	By     string    `json:"by"`
	Remote string    `json:"remote,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
}

// Fault is one fault.
type Fault struct {
	ID        string            `json:"id"`
	Type      string            `json:"type"`
	Severity  string            `json:"severity"`
	State     string            `json:"state"`
	Node      string            `json:"node"`
	GPU       string            `json:"gpu,omitempty"`
	Job       string            `json:"job,omitempty"`
	Attempt   int64             `json:"attempt"`
	Rank      int64             `json:"rank"`
	Step      int64             `json:"step"`
	FirstSeen time.Time         `json:"first_seen"`
	LastSeen  time.Time         `json:"last_seen"`
	Summary   string            `json:"summary,omitempty"`
	Evidence  map[string]string `json:"evidence,omitempty"`
	TraceID   string            `json:"trace_id,omitempty"`
	Decision  string            `json:"decision,omitempty"`
	Action    string            `json:"action,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Links     Links             `json:"links"`
	Ack       *Ack              `json:"ack"`
}

// Faults answers GET /api/v1/faults.
type Faults struct {
	Faults []Fault `json:"faults"`
}

// Node is a quarantined node.
type Node struct {
	Node           string    `json:"node"`
	FaultIDs       []string  `json:"fault_ids"`
	Actions        []string  `json:"actions"`
	Reason         string    `json:"reason"`
	Since          time.Time `json:"since"`
	ReleasePending bool      `json:"release_pending"`
	// Lifecycle is where the node is in the repair loop (absent: the
	// remediation exporter runs no repair loop for it).
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
}

// Nodes answers GET /api/v1/nodes. GET /api/v1/nodes/{node} answers one
// Node.
type Nodes struct {
	Nodes []Node `json:"nodes"`
	// Steps are the repair loop's steps in order, the last (rma) ending a
	// loop that did not return the node; present when a node carries a
	// Lifecycle.
	Steps []string `json:"steps,omitempty"`
}

// Release answers POST /api/v1/nodes/{node}/release.
type Release struct {
	Node   string `json:"node"`
	Detail string `json:"detail"`
}

// BreakerEvent is one change of the breaker.
type BreakerEvent struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// Breaker answers GET /api/v1/breaker. State is "tripped" or "closed".
type Breaker struct {
	State         string         `json:"state"`
	Tripped       bool           `json:"tripped"`
	Used          int            `json:"used"`
	Budget        int            `json:"budget"`
	Window        string         `json:"window"`
	WindowSeconds float64        `json:"window_seconds"`
	History       []BreakerEvent `json:"history"`
	// QuarantineCap is the quarantined-share cap (absent in a dry run).
	QuarantineCap *QuarantineCap `json:"quarantine_cap,omitempty"`
}

// Reset answers POST /api/v1/breaker/reset: the breaker as read after the
// reset (nil with BreakerError when that read failed).
type Reset struct {
	Reset        bool     `json:"reset"`
	Breaker      *Breaker `json:"breaker"`
	BreakerError string   `json:"breaker_error,omitempty"`
}

// RankVerdicts is a rank with straggler verdicts in a job's kept steps.
type RankVerdicts struct {
	Rank  int64  `json:"rank"`
	Node  string `json:"node,omitempty"`
	Steps int    `json:"steps"`
}

// Job is one (job, attempt) heatmap.
type Job struct {
	Job        string         `json:"job"`
	Attempt    int64          `json:"attempt"`
	Ranks      int            `json:"ranks"`
	Steps      int            `json:"steps"`
	FirstStep  int64          `json:"first_step"`
	LastStep   int64          `json:"last_step"`
	Updated    time.Time      `json:"updated"`
	Stragglers []RankVerdicts `json:"stragglers"`
	// NoCommSplit says the job's step records cannot show a straggler:
	// backward includes the collective wait (no
	// training.phase.comm_wait_ns, no flight-recorder tail), so a much
	// slower rank looks only slightly slower, and an empty Stragglers
	// proves nothing (processor/stragglerprocessor README).
	NoCommSplit bool `json:"no_comm_split"`
}

// Jobs answers GET /api/v1/jobs, most recently updated first.
type Jobs struct {
	Jobs []Job `json:"jobs"`
}

// Verdict is one straggler verdict cell of a heatmap.
type Verdict struct {
	Rank    int64   `json:"rank"`
	Step    int64   `json:"step"`
	Verdict string  `json:"verdict"`
	Score   float64 `json:"score"`
}

// Heatmap answers GET /api/v1/jobs/{job}/heatmap: rows are Ranks (Nodes
// alongside), columns Steps; ComputeMS[r][s] and DurationMS[r][s] are null
// where the rank's step is missing.
type Heatmap struct {
	Job        string       `json:"job"`
	Attempt    int64        `json:"attempt"`
	Ranks      []int64      `json:"ranks"`
	Nodes      []string     `json:"nodes"`
	Steps      []int64      `json:"steps"`
	ComputeMS  [][]*float64 `json:"compute_ms"`
	DurationMS [][]*float64 `json:"duration_ms"`
	Verdicts   []Verdict    `json:"verdicts"`
	// NoCommSplit is Job.NoCommSplit.
	NoCommSplit bool `json:"no_comm_split"`
}

// Action is the body of every POST.
type Action struct {
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}
