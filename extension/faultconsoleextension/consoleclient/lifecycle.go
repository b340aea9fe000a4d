package consoleclient // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"

import "time"

// Lifecycle is where a quarantined node is in the repair loop
// (docs/fault-record.md, "The repair loop"), in GET /api/v1/nodes and GET
// /api/v1/nodes/{node}.
type Lifecycle struct {
	// Step is the current step (Nodes.Steps lists them in order), Since
	// when the node entered it and InStepSeconds how long ago that was by
	// the console's clock when it answered.
	Step          string    `json:"step"`
	Since         time.Time `json:"since"`
	InStepSeconds float64   `json:"in_step_seconds"`
	// Repair is the repair action in flight or last done (gpu_reset,
	// reboot, rma; absent before the first), Attempt its number in the
	// node's loop (1 for the first repair, 0 before it).
	Repair  string `json:"repair,omitempty"`
	Attempt int    `json:"attempt"`
	// Alarm: the node is in the rma step, every repair failed and it
	// waits for a human.
	Alarm bool `json:"alarm"`
	// History is every step the node went through, oldest first;
	// Verifications every verification's result, oldest first.
	History       []LifecycleStep `json:"history"`
	Verifications []Verification  `json:"verifications"`
}

// LifecycleStep is one step of a node's loop: when the node entered it,
// and what happened (the repair's answer, the check's, ...).
type LifecycleStep struct {
	Step   string    `json:"step"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// Verification is one verification's result on a node: the checks run
// (e.g. "dcgm_diag level 2, links_steady 5m0s"), passed or not, and why.
type Verification struct {
	At     time.Time `json:"at"`
	Checks string    `json:"checks"`
	Passed bool      `json:"passed"`
	Detail string    `json:"detail,omitempty"`
}

// LastVerification is the newest verification (nil: none yet).
func (l *Lifecycle) LastVerification() *Verification {
	if l == nil || len(l.Verifications) == 0 {
		return nil
	}
	return &l.Verifications[len(l.Verifications)-1]
}
