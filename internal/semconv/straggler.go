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
	// AttrStragglerOnsetStep and AttrStragglerOnsetUnixNano name the first
	// flagged step of a verdict and that step's start (data time, Unix ns):
	// the correlator's fault.first_seen for the fault the verdict opens.
	AttrStragglerOnsetStep     = "straggler.onset_step"
	AttrStragglerOnsetUnixNano = "straggler.onset_unix_nano"
	// AttrStragglerJobVerdict is on a step's root span when a configured
	// share of a group is slow at once (a job slowdown or a bimodal job,
	// not N stragglers): the value is VerdictJobSlowdown.
	AttrStragglerJobVerdict = "straggler.job_verdict"
	// AttrStragglerSlowShare is the share of the group's ranks slow at once.
	AttrStragglerSlowShare = "straggler.slow_share"
	// VerdictJobSlowdown is the job-level verdict (fault type job.slowdown).
	VerdictJobSlowdown = "job.slowdown"
	// StragglerAttrPrefix starts every attribute the straggler processor
	// writes on a span besides the step.* summary; it strips them from
	// every span it receives.
	StragglerAttrPrefix = "straggler."
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
