package testbed

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// WarningKinds are the straggler processor's job warnings a scenario can
// expect (scenarios.yaml: warnings), each by a snippet of its message
// (processor/stragglerprocessor README: "Node clocks", "Jobs whose records
// cannot show a straggler").
var WarningKinds = map[string]string{
	"clock_skew":    "node clocks disagree",
	"no_comm_split": "cannot show a straggler",
}

// stragglerWarningPrefix starts every message of the straggler processor.
const stragglerWarningPrefix = "stragglerprocessor: "

// warningLog keeps the collector's WARN entries beside its own logger.
type warningLog struct {
	logs *observer.ObservedLogs
	core zapcore.Core
}

func newWarningLog() *warningLog {
	core, logs := observer.New(zapcore.WarnLevel)
	return &warningLog{logs: logs, core: core}
}

// option tees the collector's logger into the log.
func (w *warningLog) option() zap.Option {
	return zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, w.core) })
}

// byJob counts the straggler processor's warnings of each kind by the job
// they name (training.job.id).
func (w *warningLog) byJob() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, e := range w.logs.All() {
		if e.Level != zapcore.WarnLevel || !strings.HasPrefix(e.Message, stragglerWarningPrefix) {
			continue
		}
		job, _ := e.ContextMap()[semconv.AttrTrainingJobID].(string)
		if job == "" {
			continue
		}
		for kind, snippet := range WarningKinds {
			if strings.Contains(e.Message, snippet) {
				if out[job] == nil {
					out[job] = map[string]int{}
				}
				out[job][kind]++
			}
		}
	}
	return out
}

// checkWarnings compares each job's warnings (warningLog.byJob) with its
// scenario's: every kind, listed or not (a kind not listed expects none).
func checkWarnings(rep *Report, jobs []*job, got map[string]map[string]int) {
	kinds := slices.Sorted(maps.Keys(WarningKinds))
	for i, j := range jobs {
		if i >= len(rep.Scenarios) {
			return
		}
		res := &rep.Scenarios[i]
		res.Warnings = map[string]int{}
		for _, kind := range kinds {
			n, want := got[j.id][kind], j.sc.Warnings[kind]
			if n > 0 {
				res.Warnings[kind] = n
			}
			if n != want {
				res.WrongWarnings = append(res.WrongWarnings, fmt.Sprintf("%s: %d, want %d", kind, n, want))
			}
		}
	}
}
