package semconv

// Names of the gpu_repair receiver's records (issue 33): each job the agent
// finishes (a GPU reset, a verification) is one log record, which reaches
// the gateway on Kafka with the node's other logs. They are hardware
// signals (hardware.go): only the agent's own receiver may write them, and
// the provenance processor renames a sender's claim of one, so that no
// OTLP sender can forge "the reset passed" or "the node verified".
const (
	// EventGPURepairResult is the event.name of a finished repair job. Its
	// body is the job (internal/repair.Job) as JSON.
	EventGPURepairResult = "gpu.repair.result"
	// AttrGPURepairJobID is the job's id (the gateway's request id).
	AttrGPURepairJobID = "gpu.repair.job_id"
	// AttrGPURepairKind is gpu_reset or verify.
	AttrGPURepairKind = "gpu.repair.kind"
	// AttrGPURepairState is the job's final state: passed, failed, refused.
	AttrGPURepairState = "gpu.repair.state"
	// AttrGPURepairFaultID is the fault the job serves.
	AttrGPURepairFaultID = "gpu.repair.fault_id"
	// AttrGPURepairDetail says what happened, for a human.
	AttrGPURepairDetail = "gpu.repair.detail"
)
