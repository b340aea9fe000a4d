package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// lagWarnEvery is how often one job's late verdicts are logged at most.
const lagWarnEvery = time.Hour

// longestVerdictWindow returns the longest window of the rules that read
// straggler verdicts (rank or job): a verdict that arrives later than
// that would have been outside every such window at its data time.
func longestVerdictWindow(rs []rules.Rule) time.Duration {
	var longest time.Duration
	for _, r := range rs {
		for _, cond := range append(append([]rules.Condition{}, r.All...), r.Any...) {
			if cond.Signal == semconv.AttrStragglerVerdict || cond.Signal == semconv.AttrStragglerJobVerdict {
				longest = max(longest, r.Window)
			}
		}
	}
	return longest
}

// noteVerdictLag records the lag of a verdict span that ended at end and
// arrived at now (otelcol_faultcorrelator_verdict_lag_seconds): a negative
// lag, the node's clock ahead of the gateway's, is recorded as 0 and
// counted (otelcol_faultcorrelator_verdict_clock_ahead). A lag longer than
// the longest verdict rule window is logged, once per job per
// lagWarnEvery: the verdict still counts (it is placed at its arrival),
// but its fault opens that much after the step. Callers hold c.mu.
func (c *correlator) noteVerdictLag(ctx context.Context, job string, end pcommon.Timestamp, now time.Time) {
	if end == 0 {
		return // no end: no lag to tell
	}
	lag := now.Sub(end.AsTime())
	if lag < 0 {
		c.telemetry.FaultcorrelatorVerdictClockAhead.Add(ctx, 1)
		lag = 0
	}
	c.telemetry.FaultcorrelatorVerdictLagSeconds.Record(ctx, lag.Seconds())
	if c.verdictWindow <= 0 || lag <= c.verdictWindow {
		return
	}
	if last, ok := c.lagWarned[job]; ok && now.Sub(last) < lagWarnEvery {
		return
	}
	if len(c.lagWarned) >= c.cfg.MaxEntities {
		clear(c.lagWarned) // bounded: at worst a job is warned about again
	}
	c.lagWarned[job] = now
	c.logger.Warn("faultcorrelator: straggler verdicts arrive later than the straggler rules' window (consumer lag, or the node's clock behind); they are placed at their arrival and still count, their evidence keeps the step's time",
		zap.String(semconv.AttrTrainingJobID, job), zap.Duration("lag", lag), zap.Duration("window", c.verdictWindow))
}
