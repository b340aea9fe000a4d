package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// Jobs whose step records cannot show a straggler (issue 30). Without
// training.phase.comm_wait_ns and without the flight recorder's
// nccl.collectives.tail_ns, a rank's backward phase includes its wait for
// the overlapped gradient all-reduce (signal), and in synchronous training
// every rank waits for the slowest: a rank 2.3x slower than its peers
// shows as about 1.04x. Such a job is named once (a warning and
// otelcol_processor_straggler_jobs_without_comm_split) and the console's
// job view says so.

// commSplitSteps is how many decided steps a job must have, none of whose
// records separated the wait from compute, before it is named.
const commSplitSteps = 10

// commSplit is what a job's step records showed of the collective wait.
type commSplit struct {
	steps  int  // decided steps
	split  bool // a record of the job separated the wait from compute
	warned bool // the job's one warning was logged
}

// blind reports whether the job is named as unable to show a straggler
// now: warned, and no record has separated the wait since.
func (c *commSplit) blind() bool { return c.warned && !c.split }

// waitSplit reports whether a step record's compute signal leaves the
// collective wait out (signal): phases with comm_wait_ns (compute-only
// phases) or with the flight recorder's tail_ns (taken off backward);
// phases without a backward phase; or no phases and
// nccl.collectives.total_ns (taken off the step's duration). Backward
// without either, or a bare step duration, includes the wait.
func waitSplit(a *steprecord.Attrs) bool {
	if a.Has(steprecord.FieldPhaseCommWait) || a.Has(steprecord.FieldCollectivesTailNs) {
		return true
	}
	if a.Has(steprecord.FieldPhaseBackward) {
		return false
	}
	for _, ph := range computePhases {
		if a.Has(ph.Field()) {
			return true
		}
	}
	return a.Has(steprecord.FieldCollectivesTotalNs)
}

// checkCommSplit counts a decided step of the job and names the job once
// when none of its first commSplitSteps decided steps' records separated
// the wait. Callers hold p.mu.
func (p *stragglerProcessor) checkCommSplit(js *jobState, eff *effects) {
	c := &js.comm
	c.steps++
	if c.split || c.warned || c.steps < commSplitSteps {
		return
	}
	c.warned = true
	eff.blindJobs++
	p.logger.Warn("stragglerprocessor: the job's step records cannot show a straggler: backward includes the collective wait "+
		"(no training.phase.comm_wait_ns, no flight-recorder nccl.collectives.tail_ns); a rank much slower than its peers looks "+
		"only slightly slower. Report comm_wait_ns from the script (docs/training-scripts.md) or run the flight recorder",
		zap.String(semconv.AttrTrainingJobID, js.key.job), zap.Int64(semconv.AttrTrainingAttempt, js.key.attempt),
		zap.Int("decided_steps", c.steps))
}
