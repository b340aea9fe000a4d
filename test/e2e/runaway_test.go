//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// One runaway job floods otlp_spans with far more spans than its budget
// while another job trains normally on the same partitions: the gateway
// cuts the runaway job to its budget (counted in its own telemetry) and
// every span of the other job reaches Tempo. Tail sampling keeps 100 %
// here so that Tempo sees everything the rate limit let through.
func TestRunawayJobDoesNotStarveOthers(t *testing.T) {
	const budget = 2000 // spans/s per job, burst 200,000 as configured
	gw := startSpansGateway(t, 1, "TAIL_SAMPLING_PERCENTAGE=100",
		"RATELIMIT_JOB_SPANS_PER_SECOND="+strconv.Itoa(budget))
	broker, gateway, tempo, brokerAddr, telemetry := gw.broker, gw.gateway, gw.tempo, gw.brokerAddr, gw.telemetry

	// The runaway job: 600,000 spans (three times the burst) in 300
	// messages, one trace per message. The healthy job: 40 steps of 8 ranks,
	// produced after the flood, so they queue behind it on the one partition.
	const (
		floodMessages = 300
		floodPerMsg   = 2000
		healthySteps  = 40
		ranks         = 8
	)
	start := time.Now()
	var batches []ptrace.Traces
	for m := 0; m < floodMessages; m++ {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("training.job.id", "runaway")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		spans.EnsureCapacity(floodPerMsg)
		tid := steprecord.TraceID("runaway", 0, int64(m))
		for i := 0; i < floodPerMsg; i++ {
			sp := spans.AppendEmpty()
			sp.SetName("train.microstep")
			sp.SetTraceID(tid)
			sp.SetSpanID(steprecord.RankSpanID("runaway", 0, int64(m), int64(i)))
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		}
		batches = append(batches, td)
	}
	for s := int64(0); s < healthySteps; s++ {
		td := ptrace.NewTraces()
		for r := int64(0); r < ranks; r++ {
			stepSpan(td, "healthy", s, r, ranks, start.Add(time.Duration(s)*time.Second), 1)
		}
		batches = append(batches, td)
	}
	produceTraces(t, brokerAddr, batches)

	eventually(t, 3*time.Minute, "every span of the healthy job at Tempo", func() error {
		for s := int64(0); s < healthySteps; s++ {
			if n := tempo.spansNamed(steprecord.TraceID("healthy", 0, s), "train.step"); n != ranks {
				return fmt.Errorf("step %d: %d of %d rank spans", s, n, ranks)
			}
		}
		return nil
	}, gateway, broker)
	elapsed := time.Since(start)

	passed := 0
	for m := 0; m < floodMessages; m++ {
		passed += tempo.spans(steprecord.TraceID("runaway", 0, int64(m)))
	}
	// The bucket starts full (burst) and refills at the budget.
	limit := 200000 + int(elapsed.Seconds()+1)*budget
	if passed > limit {
		t.Errorf("runaway job: %d spans reached Tempo in %s, budget allows %d", passed, elapsed.Round(time.Second), limit)
	}
	dropped := droppedSpans(t, "http://"+telemetry+"/metrics", "runaway")
	if dropped == 0 || passed+int(dropped) < floodMessages*floodPerMsg {
		t.Errorf("runaway job: %d spans passed and %v counted as dropped, of %d sent", passed, dropped, floodMessages*floodPerMsg)
	}
	t.Logf("runaway job: %d of %d spans passed, %.0f dropped, in %s; healthy job: every span arrived",
		passed, floodMessages*floodPerMsg, dropped, elapsed.Round(time.Second))
	if t.Failed() {
		gateway.dumpLog(t, 40)
	}
}

// droppedSpans sums the ratelimit processor's dropped-span counters for a
// key over the gateway's pipelines, from its Prometheus telemetry endpoint.
func droppedSpans(t *testing.T, url, key string) float64 {
	return telemetrySum(t, url, "otelcol_processor_ratelimit_dropped_items", `key="`+key+`"`, `signal="traces"`)
}

// telemetrySum sums the samples of a collector's own metric (with or
// without the _total suffix) whose labels include every one of labels
// (`name="value"`), read from its Prometheus telemetry endpoint.
func telemetrySum(t *testing.T, url, metric string, labels ...string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `(?:_total)?\{([^}]*)\} (\S+)$`)
	var sum float64
	for _, m := range line.FindAllStringSubmatch(string(body), -1) {
		// labels are `a="x",b="y"`: a wanted label is one of them whole.
		have := "," + m[1] + ","
		if !slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(have, ","+l+",") }) {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("%s: %v", m[0], err)
			}
			sum += v
		}
	}
	return sum
}
