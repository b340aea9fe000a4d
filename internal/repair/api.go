package repair

import "time"

// The agent's repair API: the remediation exporter (gateway) calls the
// agent of the node it repairs. Every request is signed by the gateway's
// private key and carries the node it is for; an agent refuses a request
// for any other node, an unsigned or stale one, and a replayed request id
// (docs/security.md, "Repair actions"). Paths are relative to the agent's
// repair endpoint.
const (
	PathNode     = "/v1/repair/node"      // GET: NodeStatus
	PathGPUReset = "/v1/repair/gpu_reset" // POST GPUResetRequest: Job
	PathVerify   = "/v1/repair/verify"    // POST VerifyRequest: Job
	PathJobs     = "/v1/repair/jobs/"     // GET PathJobs + id: Job
	PathConfirm  = "/v1/repair/confirm"   // POST ConfirmRequest: Confirmation
)

// ConfirmRequest asks a node's agent whether its own hardware signals (the
// agent's receivers, never what arrives over OTLP) show the fault. The
// gateway asks before the first repair: a fault made of signals that some
// other writer of the input topics forged about this node is not confirmed
// by the node itself, and nothing is repaired (docs/security.md, "Repair
// actions").
type ConfirmRequest struct {
	ID        string `json:"id"`
	Node      string `json:"node"`
	FaultID   string `json:"fault_id"`
	FaultType string `json:"fault_type"`
	GPUUUID   string `json:"gpu_uuid,omitempty"`
	XID       int    `json:"xid,omitempty"`
	// Since is the fault's onset: the agent looks at its signals from a
	// margin before it until now (bounded by what it keeps).
	Since time.Time `json:"since"`
}

// Confirmation is a node agent's answer to a ConfirmRequest.
type Confirmation struct {
	Confirmed bool `json:"confirmed"`
	// Detail says what the agent saw (or did not).
	Detail string `json:"detail"`
	// Evidence lists the agent's own readings that confirm it, e.g.
	// "ecc.dbe_volatile +2 since 10:02:03".
	Evidence []string `json:"evidence,omitempty"`
}

// NodeStatus is what an agent says about its node.
type NodeStatus struct {
	Node string `json:"node"`
	// BootID is /proc/sys/kernel/random/boot_id: a reboot changes it, which
	// is how the gateway sees a reboot done whatever carried it out.
	BootID string `json:"boot_id"`
	// GPUs lists the node's GPUs and whether each is busy.
	GPUs []GPUStatus `json:"gpus"`
}

// GPUStatus is one GPU of a node.
type GPUStatus struct {
	UUID  string `json:"uuid"`
	Index int    `json:"index"`
	// Busy: a process uses the GPU, or the agent cannot tell (fail closed).
	Busy bool `json:"busy"`
	// Why says what made it busy ("2 processes", "no reading for 40s").
	Why string `json:"why,omitempty"`
}

// GPUResetRequest asks the agent to reset one idle GPU.
type GPUResetRequest struct {
	// ID is the request id: the job's id, and the idempotency key (a retry
	// with the same id returns the same job).
	ID      string `json:"id"`
	Node    string `json:"node"`
	FaultID string `json:"fault_id"`
	GPUUUID string `json:"gpu_uuid"`
}

// VerifyRequest asks the agent to verify its node before release.
type VerifyRequest struct {
	ID      string `json:"id"`
	Node    string `json:"node"`
	FaultID string `json:"fault_id"`
	// GPUs to check (UUIDs); empty: every GPU of the node.
	GPUs   []string    `json:"gpus,omitempty"`
	Checks []CheckSpec `json:"checks"`
}

// CheckSpec is one check of a verification.
type CheckSpec struct {
	Check Check `json:"check"`
	// Level is the DCGM diagnostic level (1-3) of CheckDiag.
	Level int `json:"level,omitempty"`
	// Window is how long CheckLinksSteady watches the counters.
	Window time.Duration `json:"window,omitempty"`
}

// JobState is where an agent's job is.
type JobState string

// Job states. Passed, Failed and Refused are final.
const (
	JobPending JobState = "pending" // accepted, waits for its GPUs to be idle or for another job
	JobRunning JobState = "running"
	JobPassed  JobState = "passed"  // the reset succeeded; every check passed
	JobFailed  JobState = "failed"  // the reset or a check failed
	JobRefused JobState = "refused" // not done: the GPU was busy, unknown, or the request not allowed
)

// Final reports whether s ends the job.
func (s JobState) Final() bool { return s == JobPassed || s == JobFailed || s == JobRefused }

// Job is one repair or verification the agent runs.
type Job struct {
	ID       string    `json:"id"`
	Node     string    `json:"node"`
	FaultID  string    `json:"fault_id"`
	Kind     string    `json:"kind"` // "gpu_reset" or "verify"
	State    JobState  `json:"state"`
	Detail   string    `json:"detail,omitempty"`
	Started  time.Time `json:"started,omitempty"`
	Finished time.Time `json:"finished,omitempty"`
	// Results are the checks' results (verify) or the reset's (one entry).
	Results []CheckResult `json:"results,omitempty"`
}

// CheckResult is one check's (or the reset's) outcome.
type CheckResult struct {
	Check  string `json:"check"` // a Check, or "gpu_reset"
	GPU    string `json:"gpu,omitempty"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
	// Tests are the diagnostic's individual tests (DCGM's names) that did
	// not pass, with DCGM's message.
	Tests []TestResult `json:"tests,omitempty"`
}

// TestResult is one DCGM diagnostic test.
type TestResult struct {
	Name   string `json:"name"`
	Result string `json:"result"` // pass, fail, warn, skip
	Info   string `json:"info,omitempty"`
}
