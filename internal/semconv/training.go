package semconv

// The training-step contract (docs/training-scripts.md). A training script
// (through the Python SDK or its own OpenTelemetry code) or the steplogs
// connector writes a train.step span per rank per step; the stepspan
// processor gives it the contract's ids and folds in collectives and
// health; the straggler processor, the stepmetrics connector and the fault
// correlator read it on the gateway. internal/steprecord is the one reader
// and writer of these attributes.
const (
	// SpanTrainStep is one rank's step. Written by training scripts and the
	// steplogs connector; read by stepspan, straggler, stepmetrics,
	// faultcorrelator.
	SpanTrainStep = "train.step"
	// SpanTrainStepRoot is the step's root span, the rank spans' parent.
	// Written by the straggler processor; read by the correlator and tail
	// sampling (step.slow).
	SpanTrainStepRoot = "train.step.root"
	// SpanTrainStepVerdict carries a rank's straggler verdict. Written by the
	// straggler processor; read by the correlator.
	SpanTrainStepVerdict = "train.step.verdict"
	// SpanTrainPhasePrefix starts the names of a step's phase spans
	// (train.phase.forward, ...), which scripts may send as children.
	SpanTrainPhasePrefix = "train.phase."

	// AttrTrainingAttempt counts the job's restarts (0 when absent): a new
	// attempt replays steps, and its ids differ.
	AttrTrainingAttempt = "training.attempt"
	// AttrTrainingLocalRank is the rank's index on its node.
	AttrTrainingLocalRank = "training.local_rank"
	// AttrTrainingPPStage is the rank's pipeline stage: the straggler
	// processor compares ranks within a stage.
	AttrTrainingPPStage = "training.pp_stage"
	// AttrTrainingLoss is the step's loss; the correlator's loss rules read it.
	AttrTrainingLoss = "training.loss"
	// AttrTrainingError is a script's error text; the correlator reads it.
	AttrTrainingError = "training.error"
	// AttrTrainingTokens is the tokens the rank processed in the step
	// (stepmetrics: tokens/s).
	AttrTrainingTokens = "training.tokens"
	// AttrTrainingFlops is the rank's FLOPs in the step (stepmetrics: MFU).
	AttrTrainingFlops = "training.flops"

	// AttrTrainingPhasePrefix and AttrTrainingPhaseSuffix frame a phase's
	// duration in ns: training.phase.<name>_ns.
	AttrTrainingPhasePrefix = "training.phase."
	AttrTrainingPhaseSuffix = "_ns"
	// The phases the straggler processor and stepmetrics read.
	AttrPhaseDataloadNs  = "training.phase.dataload_ns"
	AttrPhaseForwardNs   = "training.phase.forward_ns"
	AttrPhaseBackwardNs  = "training.phase.backward_ns"
	AttrPhaseOptimizerNs = "training.phase.optimizer_ns"
	// AttrPhaseCommWaitNs is the time the rank's step was blocked waiting
	// for communication its compute did not hide (the exposed wait, e.g.
	// the tail of an overlapped gradient all-reduce). A span that carries it
	// (0 included) declares that its forward, backward and optimizer phases
	// are the rank's own compute only (docs/training-scripts.md).
	AttrPhaseCommWaitNs = "training.phase.comm_wait_ns"

	// The summary of a rank's NCCL collectives in the step, written by the
	// stepspan processor (or a script), read by the straggler processor and
	// the correlator.
	AttrCollectivesCount     = "nccl.collectives.count"
	AttrCollectivesTotalNs   = "nccl.collectives.total_ns"
	AttrCollectivesMaxNs     = "nccl.collectives.max_ns"
	AttrCollectivesMaxName   = "nccl.collectives.max_name"
	AttrCollectivesOffsetsNs = "nccl.collectives.enqueue_offsets_ns"
	AttrCollectivesAnomalies = "nccl.collectives.anomalies"
	// AttrCollectivesTailNs is the rank's exposed collective wait in the
	// step as the flight recorder shows it: from the rank's last collective
	// enqueue in the step to the completion of the step's last collective
	// (written by the stepspan processor when the entries carry times).
	AttrCollectivesTailNs = "nccl.collectives.tail_ns"
)

// Metrics of the stepmetrics connector; the correlator reads the step
// duration (training.step.duration) as a signal.
const (
	MetricTrainingStepDuration  = "training.step.duration"
	MetricTrainingTokensRate    = "training.tokens.rate"
	MetricTrainingDataloadShare = "training.dataload.share"
	MetricTrainingMFU           = "training.mfu"
)

// Names a step record carries besides the training contract's own.
const (
	// AttrServiceName is OpenTelemetry's service.name: the training program
	// on a rank's resource, the gateway on the spans the straggler
	// processor derives.
	AttrServiceName = "service.name"
	// AttrDurationNs is a step log record's length (docs/training-scripts.md,
	// "The log-record alternative"); the steplogs connector turns it into
	// the span's end.
	AttrDurationNs = "duration_ns"
)
