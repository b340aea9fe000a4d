package webhook

import (
	"math"
	"strconv"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Payload is the JSON body of every webhook request (README.md shows one).
type Payload struct {
	// Route tells the receiver where the record goes: page (P1), chat
	// (P2), record (P3, P4, and anything only recorded).
	Route    string   `json:"route"`
	Fault    Fault    `json:"fault"`
	Decision Decision `json:"decision"`
	// SentAt is when the exporter built the request (RFC 3339).
	SentAt string `json:"sent_at"`
	// EvidenceBundle goes with the repair loop's RMA review request
	// (human_approval after every repair failed); absent otherwise.
	EvidenceBundle *EvidenceBundle `json:"evidence_bundle,omitempty"`
}

// EvidenceBundle is what a human reviewing an RMA needs: the node's fault
// records, the last hardware readings they carry as evidence, the XID
// history, the verification's results and every step of the repair loop
// with its time.
type EvidenceBundle struct {
	Node     string   `json:"node"`
	FaultIDs []string `json:"fault_ids"`
	// Faults are the records of the node's faults this exporter still has
	// (a restart keeps only their ids).
	Faults []Fault `json:"faults"`
	// Readings are the last hardware readings (DCGM, ib) of the records'
	// evidence, one per signal and GPU, newest first.
	Readings   []Evidence `json:"dcgm_readings"`
	XIDHistory []XIDEvent `json:"xid_history"`
	// Verification is the last verification's results; Verifications
	// every verification of the loop, oldest first (a failed diagnostic
	// before and after a reboot shows whether the reboot changed anything).
	Verification  []CheckResult    `json:"verification"`
	Verifications []Verification   `json:"verifications"`
	Steps         []LifecycleEvent `json:"steps"`
}

// Verification is one verification of the repair loop.
type Verification struct {
	At      string        `json:"at"`
	Passed  bool          `json:"passed"`
	Results []CheckResult `json:"results"`
}

// XIDEvent is one XID a fault record reported.
type XIDEvent struct {
	XID     int    `json:"gpu.xid"`
	Time    string `json:"time"`
	FaultID string `json:"fault.id,omitempty"`
	GPUUUID string `json:"gpu.uuid,omitempty"`
}

// CheckResult is one verification check's outcome (internal/repair's).
type CheckResult = repair.CheckResult

// LifecycleEvent is one step of the repair loop.
type LifecycleEvent struct {
	Step    string `json:"step"`
	At      string `json:"at"`
	Action  string `json:"repair.action,omitempty"`
	Attempt int    `json:"repair.attempt,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// Decision is what the exporter did about the record.
type Decision struct {
	// Request: notify, restart_app, human_approval or breaker_tripped.
	Request string `json:"request"`
	// Outcome: acted, dry_run, skipped or failed (the node action's).
	Outcome string `json:"outcome"`
	// Actions are the node actions taken (or that dry-run would take).
	Actions  []string `json:"actions"`
	Platform string   `json:"platform,omitempty"`
	Node     string   `json:"node,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Rule     string   `json:"rule,omitempty"`
	DryRun   bool     `json:"dry_run"`
	// Attempt is a repair request's place in the node's repair ladder (1
	// for the first; request reboot or gpu_reset); absent otherwise.
	Attempt int `json:"attempt,omitempty"`
}

// Fault is the fault record's fields (docs/fault-record.md), named after
// its attributes.
type Fault struct {
	ID          string     `json:"fault.id"`
	Type        string     `json:"fault.type"`
	State       string     `json:"fault.state"`
	Severity    string     `json:"fault.severity"`
	Confidence  float64    `json:"fault.confidence"`
	Rule        string     `json:"fault.rule"`
	Action      string     `json:"fault.action"`
	BlastRadius string     `json:"fault.blast_radius"`
	Entity      string     `json:"fault.entity"`
	FirstSeen   string     `json:"fault.first_seen"`
	LastSeen    string     `json:"fault.last_seen"`
	XID         int        `json:"gpu.xid,omitempty"`
	HostName    string     `json:"host.name,omitempty"`
	GPUUUID     string     `json:"gpu.uuid,omitempty"`
	JobID       string     `json:"training.job.id,omitempty"`
	Rank        *int64     `json:"training.rank,omitempty"`
	Summary     string     `json:"body"`
	Evidence    []Evidence `json:"fault.evidence"`

	// PresentAtStart: the fault was already there at the agent's first
	// reading (fault.present_at_start); absent otherwise, like the attribute.
	PresentAtStart bool `json:"fault.present_at_start,omitempty"`
}

// Evidence is one item of fault.evidence.
type Evidence struct {
	Signal string `json:"signal"`
	// Value is a number, or the string "NaN", "+Inf" or "-Inf" (a NaN loss
	// is evidence too, and JSON has no number for it).
	Value   any    `json:"value"`
	Text    string `json:"text,omitempty"`
	Time    string `json:"time"`
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// FaultFromRecord copies r into its JSON shape.
func FaultFromRecord(r fault.Record) Fault {
	f := Fault{
		ID: r.ID, Type: string(r.Type), State: string(r.State), Severity: string(r.Severity),
		Confidence: r.Confidence, Rule: r.Rule, Action: string(r.Action), BlastRadius: string(r.BlastRadius),
		Entity: r.Entity.String(), FirstSeen: r.FirstSeen.UTC().Format(time.RFC3339Nano),
		LastSeen: r.LastSeen.UTC().Format(time.RFC3339Nano), XID: r.XID, HostName: r.HostName,
		GPUUUID: r.GPUUUID, JobID: r.JobID, Summary: r.Summary, Evidence: make([]Evidence, 0, len(r.Evidence)),
		PresentAtStart: r.PresentAtStart,
	}
	if r.RankKnown {
		rank := r.Rank
		f.Rank = &rank
	}
	for _, ev := range r.Evidence {
		e := Evidence{Signal: ev.Signal, Value: jsonNumber(ev.Value), Text: ev.Text, Time: ev.Time.UTC().Format(time.RFC3339Nano)}
		if !ev.TraceID.IsEmpty() {
			e.TraceID = ev.TraceID.String()
		}
		if !ev.SpanID.IsEmpty() {
			e.SpanID = ev.SpanID.String()
		}
		f.Evidence = append(f.Evidence, e)
	}
	return f
}

func jsonNumber(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return v
}
