package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// The gateway's repair loop metrics (exporter/remediationexporter
// metadata.yaml) as its telemetry endpoint names them.
const (
	metricTimeToRecovery = "otelcol_remediation_time_to_recovery_seconds"
	metricStepSeconds    = "otelcol_remediation_lifecycle_step_seconds"
)

// maxMetricsPage bounds the gateway's telemetry page the demo reads.
const maxMetricsPage = 16 << 20

// loopStep is one step of a node's repair loop: an audit entry of step
// "repair" that moved the loop (decision acted or dry_run).
type loopStep struct {
	Step     string
	At       time.Time
	Action   string
	Attempt  int
	Decision string
}

// repairLoop is one node's way through the repair loop, from its onset.
type repairLoop struct {
	Node, FaultID, FaultType string
	Steps                    []loopStep
}

// ended: the loop reached released or rma.
func (l repairLoop) ended() bool {
	if len(l.Steps) == 0 {
		return false
	}
	last := l.Steps[len(l.Steps)-1].Step
	return last == string(repair.StepReleased) || last == string(repair.StepRMA)
}

// recovery is onset → released; false when the loop did not return the
// node (yet).
func (l repairLoop) recovery() (time.Duration, bool) {
	if len(l.Steps) == 0 || l.Steps[0].Step != string(repair.StepOnset) {
		return 0, false
	}
	last := l.Steps[len(l.Steps)-1]
	if last.Step != string(repair.StepReleased) {
		return 0, false
	}
	return last.At.Sub(l.Steps[0].At), true
}

// dryRun: every step of the loop was a dry run (nothing was called).
func (l repairLoop) dryRun() bool {
	for _, s := range l.Steps {
		if s.Decision != "dry_run" {
			return false
		}
	}
	return len(l.Steps) > 0
}

// isRepairStep reports whether e moved a node's repair loop (rather than
// a wait, a refusal or a failure audited on the way).
func isRepairStep(e auditEntry) bool {
	return e.Step == "repair" && e.LifecycleStep != "" && (e.Decision == "dry_run" || e.Decision == "acted")
}

// repairLoops groups the repair loop's audit entries by node, in audit
// order; an onset entry starts a node's new loop.
func repairLoops(entries []auditEntry) []repairLoop {
	var loops []repairLoop
	current := map[string]int{} // node -> index into loops
	for _, e := range entries {
		if !isRepairStep(e) || e.Node == "" {
			continue
		}
		i, ok := current[e.Node]
		if !ok || e.LifecycleStep == string(repair.StepOnset) {
			loops = append(loops, repairLoop{Node: e.Node, FaultID: e.FaultID, FaultType: e.FaultType})
			i = len(loops) - 1
			current[e.Node] = i
		}
		loops[i].Steps = append(loops[i].Steps, loopStep{Step: e.LifecycleStep, At: e.Time,
			Action: e.RepairAction, Attempt: e.RepairAttempt, Decision: e.Decision})
	}
	return loops
}

// histogram is one Prometheus histogram series: cumulative buckets.
type histogram struct {
	Count   uint64
	Sum     float64
	Buckets []bucket // by upper bound, +Inf last when the page has it
}

type bucket struct {
	UpperBound float64
	Cumulative uint64
}

// medianBucket is the bucket holding the median observation: its lower
// and upper bounds; false without observations.
func (h histogram) medianBucket() (lo, hi float64, ok bool) {
	if h.Count == 0 {
		return 0, 0, false
	}
	half := float64(h.Count) / 2
	lo = 0
	for _, b := range h.Buckets {
		if float64(b.Cumulative) >= half {
			return lo, b.UpperBound, true
		}
		lo = b.UpperBound
	}
	return lo, math.Inf(1), true
}

// recoveryMetrics is what the gateway's telemetry page says of the loop.
type recoveryMetrics struct {
	TimeToRecovery histogram
	Steps          map[string]histogram // by step label
}

// parseRecoveryMetrics reads the repair loop's histograms from a page in
// the Prometheus text format. A metric the page lacks is an empty
// histogram (the gateway registers a histogram at its first observation).
func parseRecoveryMetrics(r io.Reader) (recoveryMetrics, error) {
	m := recoveryMetrics{Steps: map[string]histogram{}}
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return m, fmt.Errorf("the gateway's telemetry page: %w", err)
	}
	if f := fams[metricTimeToRecovery]; f != nil {
		for _, s := range f.GetMetric() {
			m.TimeToRecovery = addHistogram(m.TimeToRecovery, s.GetHistogram())
		}
	}
	if f := fams[metricStepSeconds]; f != nil {
		for _, s := range f.GetMetric() {
			step := label(s, "step")
			m.Steps[step] = addHistogram(m.Steps[step], s.GetHistogram())
		}
	}
	return m, nil
}

func label(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// addHistogram adds series p to h (series of one metric that differ in a
// label the demo does not split by, such as the scope's).
func addHistogram(h histogram, p *dto.Histogram) histogram {
	if p == nil {
		return h
	}
	h.Count += p.GetSampleCount()
	h.Sum += p.GetSampleSum()
	for _, b := range p.GetBucket() {
		i := slices.IndexFunc(h.Buckets, func(x bucket) bool { return x.UpperBound == b.GetUpperBound() })
		if i < 0 {
			h.Buckets = append(h.Buckets, bucket{UpperBound: b.GetUpperBound()})
			i = len(h.Buckets) - 1
		}
		h.Buckets[i].Cumulative += b.GetCumulativeCount()
	}
	slices.SortFunc(h.Buckets, func(a, b bucket) int {
		switch {
		case a.UpperBound < b.UpperBound:
			return -1
		case a.UpperBound > b.UpperBound:
			return 1
		}
		return 0
	})
	return h
}

// scrapeMetrics reads the gateway's telemetry page (its Prometheus
// endpoint): the page as read, for the output directory.
func scrapeMetrics(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	// One request a run: no connection is kept.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsPage+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxMetricsPage {
		return nil, fmt.Errorf("%s: the page exceeds %d bytes", url, maxMetricsPage)
	}
	return body, nil
}

// agreementTolerance is how far the audit's times and the metrics' may
// differ per observation: the exporter stamps the audit entry and observes
// the histogram with two readings of its clock.
const agreementTolerance = 50 * time.Millisecond

// disagreements compares the loops of the audit with the gateway's
// histograms: the recoveries (count and sum of onset → released) and the
// time in each step (count and sum of each step left). Empty: they agree.
func disagreements(loops []repairLoop, m recoveryMetrics) []string {
	var out []string
	var n uint64
	var sum time.Duration
	steps := map[string]histogram{}
	for _, l := range loops {
		if d, ok := l.recovery(); ok {
			n++
			sum += d
		}
		for i := 0; i+1 < len(l.Steps); i++ {
			h := steps[l.Steps[i].Step]
			h.Count++
			h.Sum += l.Steps[i+1].At.Sub(l.Steps[i].At).Seconds()
			steps[l.Steps[i].Step] = h
		}
	}
	check := func(what string, auditN uint64, auditSum float64, h histogram) {
		if auditN != h.Count || math.Abs(auditSum-h.Sum) > agreementTolerance.Seconds()*float64(max(auditN, 1)) {
			out = append(out, fmt.Sprintf("%s: audit %d observations, %.3fs; metrics %d, %.3fs", what, auditN, auditSum, h.Count, h.Sum))
		}
	}
	check("time to recovery", n, sum.Seconds(), m.TimeToRecovery)
	for _, step := range stepNames(steps, m.Steps) {
		check("time in "+step, steps[step].Count, steps[step].Sum, m.Steps[step])
	}
	return out
}

// stepNames are the steps of either map in the loop's order (unknown
// names last, sorted).
func stepNames(maps ...map[string]histogram) []string {
	var names []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	order := func(s string) int {
		if i := slices.Index(repair.Steps, repair.Step(s)); i >= 0 {
			return i
		}
		return len(repair.Steps)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := order(a) - order(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return names
}

// writeRecovery prints the summary's repair loop section: each node's
// steps with their offsets from the onset and its time to recovery, then
// the gateway's histograms and whether they agree with the audit. metrics
// is nil when the page could not be read (scrapeErr says why).
func writeRecovery(w io.Writer, loops []repairLoop, metrics *recoveryMetrics, scrapeErr error) {
	if len(loops) == 0 && metrics == nil && scrapeErr == nil {
		return
	}
	fmt.Fprintln(w, "repair loop (remediation exporter, repair.enabled):")
	if len(loops) == 0 {
		fmt.Fprintln(w, "  no node entered the repair loop")
	}
	for _, l := range loops {
		mode := "acted"
		if l.dryRun() {
			mode = "dry run: nothing called, each step as if done"
		}
		fmt.Fprintf(w, "  node %s  fault %s %s  (%s)\n", l.Node, l.FaultType, l.FaultID, mode)
		onset := l.Steps[0].At
		for _, s := range l.Steps {
			repairWhat := ""
			if s.Action != "" {
				repairWhat = fmt.Sprintf("  %s attempt %d", s.Action, s.Attempt)
			}
			fmt.Fprintf(w, "    %-12s %+8.1fs%s\n", s.Step, s.At.Sub(onset).Seconds(), repairWhat)
		}
		if d, ok := l.recovery(); ok {
			dry := ""
			if l.dryRun() {
				dry = " (dry run)"
			}
			fmt.Fprintf(w, "  time to recovery %s: %.1fs onset → released%s\n", l.Node, d.Seconds(), dry)
		} else {
			fmt.Fprintf(w, "  not recovered %s: the loop is in %s\n", l.Node, l.Steps[len(l.Steps)-1].Step)
		}
	}
	if metrics == nil {
		fmt.Fprintf(w, "  gateway metrics not read: %v\n", scrapeErr)
		return
	}
	h := metrics.TimeToRecovery
	line := fmt.Sprintf("  gateway %s: count %d, sum %.1fs", metricTimeToRecovery, h.Count, h.Sum)
	if lo, hi, ok := h.medianBucket(); ok {
		line += fmt.Sprintf(", mean %.1fs, median in bucket (%s, %s]", h.Sum/float64(h.Count), bound(lo), bound(hi))
	}
	fmt.Fprintln(w, line)
	if names := stepNames(metrics.Steps); len(names) > 0 {
		parts := make([]string, len(names))
		for i, step := range names {
			s := metrics.Steps[step]
			parts[i] = fmt.Sprintf("%s %.1fs (%d)", step, s.Sum, s.Count)
		}
		fmt.Fprintf(w, "  time in each step (%s, sum (count)): %s\n", metricStepSeconds, strings.Join(parts, ", "))
	}
	if diffs := disagreements(loops, *metrics); len(diffs) > 0 {
		fmt.Fprintf(w, "  MISMATCH between the audit file and the gateway's metrics: %s\n", strings.Join(diffs, "; "))
	} else {
		fmt.Fprintln(w, "  the audit file and the gateway's metrics agree")
	}
}

func bound(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%gs", v)
}

// readRecoveryMetrics scrapes and parses the gateway's page; keep (when
// not nil) is handed the page as read.
func readRecoveryMetrics(ctx context.Context, url string, keep func([]byte) error) (*recoveryMetrics, error) {
	page, err := scrapeMetrics(ctx, url)
	if err != nil {
		return nil, err
	}
	if keep != nil {
		if err := keep(page); err != nil {
			return nil, err
		}
	}
	m, err := parseRecoveryMetrics(strings.NewReader(string(page)))
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// errNoTelemetry: the run ended before the demo read the gateway's page.
var errNoTelemetry = errors.New("the run ended before the gateway's telemetry was read")

// repairOn: the demo turns the gateway's repair loop on.
func (d *demo) repairOn() bool { return d.cfg.repairCfg != "" && d.cfg.repairCfg != "off" }

// repairsPending counts the repair loops started (audited) and not ended.
func (d *demo) repairsPending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, l := range repairLoops(d.repairs) {
		if !l.ended() {
			n++
		}
	}
	return n
}

// readMetrics reads the gateway's repair loop histograms from its
// telemetry endpoint (url) and keeps the page in the output directory.
func (d *demo) readMetrics(ctx context.Context, url string) {
	m, err := readRecoveryMetrics(context.WithoutCancel(ctx), url, func(page []byte) error {
		return os.WriteFile(filepath.Join(d.outDir, "gateway-metrics.prom"), page, 0o644)
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	d.metrics, d.metricsErr = m, err
}
