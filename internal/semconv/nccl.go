package semconv

// Names of the ncclflight receiver that others read.
const (
	// MetricNCCLCollectiveDuration and MetricNCCLCollectivesTimedOut are
	// signals of the correlator's rules.
	MetricNCCLCollectiveDuration    = "nccl.collective.duration"
	MetricNCCLCollectivesIncomplete = "nccl.collectives.incomplete"
	MetricNCCLCollectivesTimedOut   = "nccl.collectives.timed_out"
	// SignalNCCLCollectiveTimedOut is the correlator's signal for a
	// collective span the watchdog retired (status "timed out").
	SignalNCCLCollectiveTimedOut = "nccl.collective.timed_out"
	// AttrNCCLRanks lists the ranks an NCCL finding names.
	AttrNCCLRanks = "nccl.ranks"
	// Values of nccl.source on collective spans the stepspan processor folds
	// into a rank's step.
	NCCLSourceFlightRecorder = "flight_recorder"
	NCCLSourceInspector      = "inspector"
	NCCLSourceRAS            = "ras"
)

// Issue 20 (H4): the culprit of a hang, from the flight-recorder analysis.
const (
	// NCCLFindingHang is the nccl.finding of the job-level hang finding:
	// the ranks (nccl.ranks) that stopped, which every stuck process group
	// of the job waits for. missing_ranks and pg_status_divergence findings
	// it explains are folded into its evidence.
	NCCLFindingHang = "hang"
	// NCCLFindingMissingRanks is the nccl.finding of ranks that never
	// enqueued a collective their peers entered (one process group).
	NCCLFindingMissingRanks = "missing_ranks"
	// NCCLFindingStraggler is the nccl.finding of the cross-rank straggler:
	// the rank that enqueues last in most collectives.
	NCCLFindingStraggler = "straggler"
	// NCCLEvidenceStuckCollective and NCCLEvidencePythonStack are keys of a
	// hang finding's nccl.evidence, per culprit ("rank.<r>.<key>"): the
	// collectives it never enqueued while its peers did ("pg <name>:<desc>
	// seq <n> <op> (...)") and the Python stack of its newest entry.
	NCCLEvidenceStuckCollective = "stuck_collective"
	NCCLEvidencePythonStack     = "python_stack"
	// SignalNCCLHangCollective and SignalNCCLHangStack are the correlator's
	// text signals, observed under each culprit rank of a hang finding, from
	// those evidence values: the nccl_hang rule quotes them in the fault.
	SignalNCCLHangCollective = "nccl.hang.collective"
	SignalNCCLHangStack      = "nccl.hang.python_stack"
	// SignalNCCLFindingStepSpans is observed with every flight-recorder
	// straggler finding under the rank it names: 1 when the gateway has
	// seen step spans of that rank, else 0 (a flight-recorder-only job).
	// The correlator knows it from its own map of ranks that sent spans,
	// so no rank's step durations need be kept to tell.
	SignalNCCLFindingStepSpans = "nccl.finding.step_spans"
)
