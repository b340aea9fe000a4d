package repair

// Step is where a quarantined node is in the repair loop. A node moves
// forward through the steps in this order; a failed verification sends it
// back to StepRepairing with the next repair, and past the last repair to
// StepRMA, where it waits for a human.
type Step string

// Steps of the lifecycle (onset → record → quarantine → drained → repaired
// → verified → released).
const (
	StepOnset       Step = "onset"       // the fault's first signal (data time)
	StepRecorded    Step = "recorded"    // the fault record reached the remediation exporter
	StepQuarantined Step = "quarantined" // the platform holds the node out of service
	StepDrained     Step = "drained"     // no workload is left on the fault's GPUs (or the node)
	StepRepairing   Step = "repairing"   // a repair action is in flight
	StepRepaired    Step = "repaired"    // the repair action reported done
	StepVerifying   Step = "verifying"   // the verification check runs
	StepVerified    Step = "verified"    // the check passed: the release follows
	StepReleased    Step = "released"    // back in service
	StepRMA         Step = "rma"         // every repair failed: waits for a human (RMA review)
)

// Steps lists the steps in lifecycle order (StepRMA last: it ends a loop
// that did not return the node).
var Steps = []Step{StepOnset, StepRecorded, StepQuarantined, StepDrained, StepRepairing,
	StepRepaired, StepVerifying, StepVerified, StepReleased, StepRMA}

// Action is one repair the policy may choose for a fault.
type Action string

// Repair actions, mildest first (the order the escalation ladder climbs).
const (
	// ActionGPUReset resets one GPU; the agent does it, only while no
	// process uses the GPU (or the platform's GPUReset object, NVSentinel's
	// janitor, on Kubernetes when configured).
	ActionGPUReset Action = "gpu_reset"
	// ActionReboot reboots the node: Slurm `scontrol reboot ASAP`, a
	// RebootNode object on Kubernetes, or the generic maintenance webhook.
	ActionReboot Action = "reboot"
	// ActionRMA asks a human to replace the part, with the evidence bundle
	// (the rma_review webhook). It never returns the node by itself.
	ActionRMA Action = "rma"
)

// Check is a verification the agent runs before a node returns.
type Check string

// Checks.
const (
	// CheckDiag runs DCGM diagnostics at a level (1 quick, 2 medium, 3 long).
	CheckDiag Check = "dcgm_diag"
	// CheckLinksSteady passes when the node's NVLink and InfiniBand error
	// counters do not grow over a window.
	CheckLinksSteady Check = "links_steady"
)
