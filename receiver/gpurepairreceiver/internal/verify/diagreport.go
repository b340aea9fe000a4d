package verify

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// DiagStatus is one DCGM diagnostic result, as both backends report it.
type DiagStatus string

// The results a diagnostic test can have on an entity. Anything else DCGM
// writes is refused by the parser: an unknown word is never a pass.
const (
	DiagPass DiagStatus = "pass"
	DiagFail DiagStatus = "fail"
	// DiagWarn: the test passed with a warning (DCGM's own word). It passes
	// the check only with DiagOptions.AllowWarn.
	DiagWarn DiagStatus = "warn"
	// DiagSkip: DCGM judged the test not applicable to the entity (an EUD
	// not installed, a test the SKU does not support). It neither passes
	// nor fails a GPU; a GPU needs at least one pass.
	DiagSkip DiagStatus = "skip"
	// DiagNotRun: the test was meant to run and did not (an earlier failure
	// stopped the run). It does not pass.
	DiagNotRun DiagStatus = "notrun"
)

// parseDiagStatus maps DCGM's words, as dcgmi's JSON ("Pass", "Skip",
// "Warn", "Fail", "Not Run") and go-dcgm ("pass", "skipped", "warn",
// "fail", "notrun") spell them, to a DiagStatus. ok is false for any other
// word, the empty one included.
func parseDiagStatus(s string) (DiagStatus, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pass":
		return DiagPass, true
	case "fail":
		return DiagFail, true
	case "warn", "warning":
		return DiagWarn, true
	case "skip", "skipped":
		return DiagSkip, true
	case "not run", "notrun":
		return DiagNotRun, true
	}
	return "", false
}

// DiagReport is one diagnostic run, whichever backend ran it.
type DiagReport struct {
	// Version is DCGM's version when the output says it.
	Version string
	Tests   []DiagTest
}

// DiagTest is one diagnostic test (a DCGM plugin: "memory", "pcie",
// "software", ...) with its result on each entity.
type DiagTest struct {
	Name     string
	Category string
	// Summary is the test's overall result (DCGM 4's test_summary); empty
	// when the output has none. A failing summary fails every GPU that has
	// no failing result of its own in the test: DCGM reports errors that
	// belong to no entity there.
	Summary DiagStatus
	// SummaryMessages are the summary's warnings.
	SummaryMessages []string
	Results         []DiagEntityResult
}

// DiagEntityResult is a test's result on one entity, or on every GPU.
type DiagEntityResult struct {
	// AllGPUs: the result names no entity and holds for every GPU of the
	// run (DCGM 3's deployment tests).
	AllGPUs bool
	// GPU is set for a GPU entity, EntityID then being its DCGM GPU id;
	// otherwise EntityGroup names the entity's kind ("CPU", ...).
	GPU         bool
	EntityGroup string
	EntityID    int
	Status      DiagStatus
	// Messages are DCGM's warnings for this result.
	Messages []string
}

// Limits on what one check's results carry, so a verbose or hostile tool
// cannot grow the job record without bound.
const (
	maxMessageBytes   = 1024
	maxMessagesJoined = 4
	maxTestsPerGPU    = 64
)

// truncateUTF8 cuts s to at most n bytes on a rune boundary, marking a cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func joinMessages(msgs []string) string {
	var b strings.Builder
	for i, m := range msgs {
		if i == maxMessagesJoined {
			fmt.Fprintf(&b, " (+%d more)", len(msgs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimSpace(m))
		if b.Len() > maxMessageBytes {
			break
		}
	}
	return truncateUTF8(b.String(), maxMessageBytes)
}

// DiagOptions say how a report becomes check results.
type DiagOptions struct {
	// AllowWarn lets a "warn" result pass (DCGM: passed with a warning).
	// Off by default: a node returns only on a clean run.
	AllowWarn bool
}

// gpuVerdict gathers one GPU's results.
type gpuVerdict struct {
	considered, passes, failures int
	listed                       []repair.TestResult
	dropped                      int
}

func (v *gpuVerdict) list(tr repair.TestResult) {
	if len(v.listed) < maxTestsPerGPU {
		v.listed = append(v.listed, tr)
		return
	}
	v.dropped++
}

// Evaluate turns a report into one result per requested GPU, matched by its
// DCGM GPU id (dcgmIDs[i] is gpus[i]'s). A GPU passes only when at least one
// test passed on it and every result that names it (or every GPU) passed
// or was skipped; a GPU no result names fails: no result is not a pass.
// Errors that name no GPU (a failing test summary's own, another entity's)
// fail every GPU that has no failure of its own in that test.
// A GPU without an id (dcgmIDs shorter than gpus, or -1) is one DCGM does
// not know: it fails.
func (r *DiagReport) Evaluate(level int, gpus []GPU, dcgmIDs []int, opts DiagOptions) []repair.CheckResult {
	if r == nil {
		r = &DiagReport{}
	}
	verdicts := make([]gpuVerdict, len(gpus))
	ids := make([]int, len(gpus))
	byID := make(map[int][]int, len(gpus))
	for i := range gpus {
		ids[i] = -1
		if i < len(dcgmIDs) && dcgmIDs[i] >= 0 {
			ids[i] = dcgmIDs[i]
			byID[ids[i]] = append(byID[ids[i]], i)
		}
	}
	ok := func(s DiagStatus) bool {
		return s == DiagPass || s == DiagSkip || (s == DiagWarn && opts.AllowWarn)
	}
	failedHere := make([]bool, len(gpus)) // per test: a result of the GPU's own failed it
	for _, t := range r.Tests {
		clear(failedHere)
		apply := func(i int, res DiagEntityResult) {
			v := &verdicts[i]
			v.considered++
			switch {
			case res.Status == DiagPass:
				v.passes++
			case !ok(res.Status):
				v.failures++
				failedHere[i] = true
			}
			// Listed: what did not pass, and skips or warnings that say why.
			if res.Status != DiagPass && (!ok(res.Status) || len(res.Messages) > 0) {
				v.list(repair.TestResult{Name: t.Name, Result: string(res.Status), Info: joinMessages(res.Messages)})
			}
		}
		var offGPU []string // failing results of entities that are not GPUs
		anyFailing := false
		for _, res := range t.Results {
			anyFailing = anyFailing || !ok(res.Status)
			switch {
			case res.AllGPUs:
				for i := range gpus {
					apply(i, res)
				}
			case res.GPU:
				for _, i := range byID[res.EntityID] {
					apply(i, res)
				}
			case !ok(res.Status):
				offGPU = append(offGPU, fmt.Sprintf("%s %d: %s: %s", res.EntityGroup, res.EntityID, res.Status, joinMessages(res.Messages)))
			}
		}
		// The summary is the test's result over every entity: it fails on
		// its own only with errors of its own (DCGM's errors of no entity)
		// or when no entity's result explains it.
		summaryBad := t.Summary != "" && !ok(t.Summary) && (len(t.SummaryMessages) > 0 || !anyFailing)
		if !summaryBad && len(offGPU) == 0 {
			continue
		}
		status := t.Summary
		if !summaryBad {
			status = DiagFail
		}
		msgs := append(append([]string(nil), t.SummaryMessages...), offGPU...)
		if len(msgs) == 0 {
			msgs = []string{"the test's summary is " + string(t.Summary) + " with no result of this GPU failing"}
		}
		for i := range gpus {
			if failedHere[i] {
				continue
			}
			v := &verdicts[i]
			v.considered++
			v.failures++
			v.list(repair.TestResult{Name: t.Name, Result: string(status), Info: joinMessages(msgs)})
		}
	}
	out := make([]repair.CheckResult, len(gpus))
	for i, g := range gpus {
		v := verdicts[i]
		cr := repair.CheckResult{Check: string(repair.CheckDiag), GPU: g.UUID, Tests: v.listed}
		switch {
		case ids[i] < 0:
			cr.Detail = fmt.Sprintf("level %d: DCGM does not list GPU %d (%s): it cannot be verified", level, g.Index, g.UUID)
		case v.considered == 0:
			cr.Detail = fmt.Sprintf("level %d: DCGM reported no result for GPU %d (DCGM GPU id %d): no result is not a pass", level, g.Index, ids[i])
		case v.failures > 0:
			cr.Detail = fmt.Sprintf("level %d: %d of %d results did not pass", level, v.failures, v.considered)
		case v.passes == 0:
			cr.Detail = fmt.Sprintf("level %d: no test passed (%d results, none a pass): a skip is not a pass", level, v.considered)
		default:
			cr.Passed = true
			cr.Detail = fmt.Sprintf("level %d: %d results passed or were not applicable", level, v.considered)
		}
		if r.Version != "" {
			cr.Detail += " (DCGM " + truncateUTF8(r.Version, 32) + ")"
		}
		if v.dropped > 0 {
			cr.Detail += "; " + strconv.Itoa(v.dropped) + " more results not listed"
		}
		out[i] = cr
	}
	return out
}
