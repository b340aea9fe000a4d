package semconv

// What the straggler processor writes on the step's root span and on a
// rank's verdict span. The correlator reads straggler.verdict (its rules
// name it as a signal); tail sampling and the rate limiter read step.slow.
const (
	AttrStragglerScore        = "straggler.score"
	AttrStragglerVerdict      = "straggler.verdict"
	AttrStragglerComputeRatio = "straggler.compute_ratio"
	AttrStragglerWaitRatio    = "straggler.wait_ratio"
	AttrStragglerFlaggedRanks = "straggler.flagged_ranks"
	// StragglerVerdictPrefix starts every verdict value: straggler.compute,
	// straggler.link, ... (the fault types of internal/fault).
	StragglerVerdictPrefix = "straggler."

	AttrStepMeanNs        = "step.mean_ns"
	AttrStepMedianNs      = "step.median_ns"
	AttrStepP99Ns         = "step.p99_ns"
	AttrStepMaxNs         = "step.max_ns"
	AttrStepSlowestRank   = "step.slowest_rank"
	AttrStepRanksReported = "step.ranks_reported"
	AttrStepSlow          = "step.slow"
)
