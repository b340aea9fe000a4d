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
