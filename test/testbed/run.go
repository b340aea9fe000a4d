package testbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/test/freeport"
)

// Options configure a run. Zero fields take the defaults of
// DefaultOptions.
type Options struct {
	// Seed of the run's randomness; 0 draws one (and the report says which).
	Seed uint64
	// Scenarios to run by name; empty runs them all.
	Scenarios []string
	// ScenariosYAML, when set, replaces the committed scenarios.yaml with a
	// document of the same format (cmd/demo's scenario.yaml).
	ScenariosYAML []byte
	// Ranks overrides every scenario's world size (a multiple of its GPUs
	// per node); 0 keeps the scenarios' own (64).
	Ranks int
	// StepPeriod is the wall-clock length of a simulated step.
	StepPeriod time.Duration
	// ScrapeInterval of the dcgm and ib receivers.
	ScrapeInterval time.Duration
	// DecisionWait of the straggler processor; CollectiveWait of stepspan.
	DecisionWait, CollectiveWait time.Duration
	// EvaluationInterval of the correlator.
	EvaluationInterval time.Duration
	// Grace is how long the run keeps collecting records after the last step.
	Grace time.Duration
	// RuleOverrides are passed to the correlator's rules key; nil scales
	// node_silent's window to 8 steps (silentRuleFor).
	RuleOverrides []map[string]any
	// LogLevel of the collector's own logs.
	LogLevel string
	// Dir holds the simulated sysfs trees and dumps; empty: a temporary
	// directory, removed at the end.
	Dir string
	// Logger reports progress; nil is silent.
	Logger *zap.Logger
	// OnStep, when set, is called after every simulated step of every job,
	// from the goroutine that drives the job (one per job, concurrently).
	OnStep func(StepDone)
	// StepSink, when set, takes every node's step records instead of the
	// testbed's own OTLP sender (cmd/demo sends them through the Python
	// module). Nil: the step spans go to the URL Drive is given.
	StepSink StepSink
}

// StepDone is one finished step of one job, as Options.OnStep sees it.
type StepDone struct {
	JobID       string
	Step, Steps int       // Step counts from 0
	Start       time.Time // when the step began (an injection's onset)
	Spans       int       // step spans (or records given to Options.StepSink) sent for it; 0 once the job stopped
	// Injected are the injections whose onset is this step.
	Injected []Injection
}

// DefaultOptions are the settings of the CI suite: a step per second and
// a scrape per second, so 36 steps take 36 s.
func DefaultOptions() Options {
	return Options{
		StepPeriod:         time.Second,
		ScrapeInterval:     time.Second,
		DecisionWait:       1500 * time.Millisecond,
		CollectiveWait:     1500 * time.Millisecond,
		EvaluationInterval: time.Second,
		Grace:              15 * time.Second,
		LogLevel:           "warn",
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.StepPeriod <= 0 {
		o.StepPeriod = d.StepPeriod
	}
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = d.ScrapeInterval
	}
	if o.DecisionWait <= 0 {
		o.DecisionWait = d.DecisionWait
	}
	if o.CollectiveWait <= 0 {
		o.CollectiveWait = d.CollectiveWait
	}
	if o.EvaluationInterval <= 0 {
		o.EvaluationInterval = d.EvaluationInterval
	}
	if o.Grace <= 0 {
		o.Grace = d.Grace
	}
	if o.RuleOverrides == nil {
		o.RuleOverrides = silentRuleFor(o.StepPeriod)
	}
	if o.LogLevel == "" {
		o.LogLevel = d.LogLevel
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for _, x := range b {
			o.Seed = o.Seed<<8 | uint64(x)
		}
		o.Seed |= 1
	}
	return o
}

// silentRuleFor scales node.silent to the simulated step: the default
// window is 2 minutes, and the suite's jobs last 36 steps, so the testbed
// (and only the testbed) uses 8 steps.
func silentRuleFor(step time.Duration) []map[string]any {
	window := 8 * step
	return []map[string]any{{
		"name": "node_silent", "description": "a node of a running job sent nothing for the window (testbed: 8 steps)",
		"fault_type": "node.silent", "severity": "P2", "action": "cordon", "blast_radius": "node",
		"confidence": 0.7, "entity": "node", "window": window.String(),
		"all": []map[string]any{{"signal": semconv.SignalNodeHeartbeat, "agg": "absent"}},
	}}
}

// lightInputs: at thousands of ranks a run cannot host a dcgm, ib and
// ncclflight receiver per node; only the step spans are simulated (with
// the collectives' total on the span, as a script timing them with CUDA
// events sends it), and only the scenarios those carry run.
func (o Options) lightInputs() bool { return o.Ranks > 512 }

// lightKinds are the injections step spans alone can show.
var lightKinds = map[string]bool{InjectComputeStraggler: true, InjectSlowLink: true, InjectLossNaN: true}

// Cluster is the simulated side of a run: the jobs of the selected
// scenarios, their nodes' dcgm-exporter pages (one HTTP server), sysfs
// trees and flight-recorder directories. Run feeds it to an in-process
// collector; the end-to-end test feeds it to agent binaries, one per node.
type Cluster struct {
	opts   Options
	jobs   []*job
	pages  *httptest.Server
	dir    string
	ownDir bool
	onsets []time.Time
}

// NodeInputs are where one simulated node's agent reads.
type NodeInputs struct {
	Host      string
	JobID     string
	Index     int      // the node's index in its job (Injection.Node)
	GPUUUIDs  []string // by GPU index (Injection.GPU)
	PageURL   string   // dcgm-exporter /metrics
	SysfsRoot string   // holds class/infiniband
	FRDir     string   // flight-recorder dumps, in FRDir/<job>/<attempt>/
}

// NewCluster lays out the selected scenarios' nodes and starts serving
// their dcgm-exporter pages. Close removes everything.
func NewCluster(opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	all, err := Scenarios()
	if opts.ScenariosYAML != nil {
		all, err = parseScenarios(opts.ScenariosYAML)
	}
	if err != nil {
		return nil, err
	}
	selected, err := selectScenarios(all, opts)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, dir: opts.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp(scratchRoot(), "gpusim-"); err != nil {
			return nil, fmt.Errorf("testbed: %w", err)
		}
		c.ownDir = true
	}
	runID := strconv.FormatUint(opts.Seed%100000, 10)
	mux := http.NewServeMux()
	for _, sc := range selected {
		// A job's randomness depends on the seed and its scenario only, so
		// one scenario run alone with the same seed draws the same numbers.
		j := newJob(sc, runID, opts.Seed)
		for _, nd := range j.nodes {
			nd.sysfsRoot = filepath.Join(c.dir, nd.host, "sys")
			if !opts.lightInputs() {
				nd.frRoot = filepath.Join(c.dir, nd.host, "fr")
				if err := os.MkdirAll(nd.frRoot, 0o755); err != nil {
					c.Close()
					return nil, fmt.Errorf("testbed: %w", err)
				}
				if err := nd.writeSysfs(); err != nil {
					c.Close()
					return nil, err
				}
			}
			mux.Handle("/"+nd.host+"/metrics", nd)
		}
		c.jobs = append(c.jobs, j)
	}
	if !opts.lightInputs() {
		if err := c.layOutDumpDirs(); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.pages = httptest.NewServer(mux)
	return c, nil
}

// layOutDumpDirs gives every node's ranks their dump directory,
// <agent's root>/<job>/0 (attempt 0: the testbed does not restart jobs). A
// job that shares another's nodes (share_nodes_with, when both run) dumps
// under that job's node n's root: one agent reads both jobs' dumps.
func (c *Cluster) layOutDumpDirs() error {
	byName := map[string]*job{}
	for _, j := range c.jobs {
		byName[j.sc.Name] = j
	}
	for _, j := range c.jobs {
		host := byName[j.sc.ShareNodesWith]
		for _, nd := range j.nodes {
			root := nd.frRoot
			if host != nil {
				root = host.nodes[nd.index%len(host.nodes)].frRoot
			}
			nd.frDir = filepath.Join(root, j.id, "0")
			if err := os.MkdirAll(nd.frDir, 0o755); err != nil {
				return fmt.Errorf("testbed: %w", err)
			}
		}
	}
	return nil
}

// Close stops the pages and removes the cluster's files.
func (c *Cluster) Close() {
	if c.pages != nil {
		c.pages.Close()
	}
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
}

// Seed is the run's seed.
func (c *Cluster) Seed() uint64 { return c.opts.Seed }

// Nodes lists every simulated node's inputs.
func (c *Cluster) Nodes() []NodeInputs {
	var out []NodeInputs
	for _, j := range c.jobs {
		for _, nd := range j.nodes {
			uuids := make([]string, len(nd.gpus))
			for g := range uuids {
				uuids[g] = j.gpuUUID(nd.index, g)
			}
			out = append(out, NodeInputs{Host: nd.host, JobID: j.id, Index: nd.index, GPUUUIDs: uuids,
				PageURL: c.pageURL(nd), SysfsRoot: nd.sysfsRoot, FRDir: nd.frRoot})
		}
	}
	return out
}

func (c *Cluster) pageURL(nd *node) string { return c.pages.URL + "/" + nd.host + "/metrics" }

// Drive runs every job's steps in real time, sending each node's step
// spans to otlpTracesURL(host) (an OTLP/HTTP /v1/traces URL), or its step
// records to Options.StepSink when set (otlpTracesURL is then not used), and
// returns when the last step is done.
func (c *Cluster) Drive(ctx context.Context, otlpTracesURL func(host string) string) error {
	client := &http.Client{Timeout: 10 * time.Second}
	c.onsets = make([]time.Time, len(c.jobs))
	var wg sync.WaitGroup
	errs := make([]error, len(c.jobs))
	for i, j := range c.jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.onsets[i], errs[i] = drive(ctx, j, c.opts, &otlpSender{url: otlpTracesURL, client: client})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Score compares the fault records received (with their arrival times)
// with the scenarios' expectations. Call it after Drive.
func (c *Cluster) Score(records []fault.Record, arrivals []time.Time) *Report {
	cs := make([]captured, len(records))
	for i := range records {
		cs[i] = captured{record: records[i], at: arrivals[i]}
	}
	return score(c.opts, c.jobs, c.onsets, cs)
}

// Run simulates the selected scenarios at once through one in-process
// collector and scores the fault records.
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	c, err := NewCluster(opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	opts.Logger.Info("testbed run", zap.Uint64("seed", opts.Seed), zap.Int("scenarios", len(c.jobs)))

	otlpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg, err := pipelineConfig(opts, c.jobs, c.pageURL, otlpAddr)
	if err != nil {
		return nil, err
	}
	sink := &capture{}
	warned := newWarningLog()
	stop, err := runCollector(ctx, cfg, sink, warned.option())
	if err != nil {
		return nil, err
	}
	started := time.Now()
	if err := c.Drive(ctx, func(string) string { return "http://" + otlpAddr + "/v1/traces" }); err != nil {
		_ = stop()
		return nil, err
	}
	opts.Logger.Info("testbed: all steps sent; collecting", zap.Duration("grace", opts.Grace))
	select {
	case <-ctx.Done():
	case <-time.After(opts.Grace):
	}
	stopErr := stop()
	records, bad := sink.snapshot()
	rep := score(opts, c.jobs, c.onsets, records)
	checkWarnings(rep, c.jobs, warned.byJob())
	rep.Duration = time.Since(started)
	rep.BadRecords = len(bad)
	if stopErr != nil {
		return rep, fmt.Errorf("testbed: collector: %w", stopErr)
	}
	return rep, ctx.Err()
}

func selectScenarios(all []Scenario, opts Options) ([]Scenario, error) {
	want, unknown := map[string]bool{}, map[string]bool{}
	for _, n := range opts.Scenarios {
		want[n], unknown[n] = true, true
	}
	var out []Scenario
	for _, sc := range all {
		delete(unknown, sc.Name)
		if len(want) > 0 && !want[sc.Name] {
			continue
		}
		if opts.lightInputs() && !sc.lightOnly() {
			continue
		}
		if opts.Ranks > 0 && !sc.KeepSize {
			if opts.Ranks%sc.GPUsPerNode != 0 {
				return nil, fmt.Errorf("testbed: ranks %d is not a multiple of %d GPUs per node", opts.Ranks, sc.GPUsPerNode)
			}
			sc.Nodes = opts.Ranks / sc.GPUsPerNode
			sc.remapNodes()
		}
		out = append(out, sc)
	}
	for n := range unknown {
		return nil, fmt.Errorf("testbed: no scenario named %q", n)
	}
	if len(out) == 0 {
		return nil, errors.New("testbed: no scenario selected")
	}
	return out, nil
}

func freeAddr() (string, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return "", fmt.Errorf("testbed: finding a free port: %w", err)
	}
	return addr, nil
}

// lightOnly reports whether step spans alone show every injection.
func (s *Scenario) lightOnly() bool {
	if s.NoStepSpans || s.Overlap == OverlapLegacy {
		return false // the flight recorder carries the evidence
	}
	for _, in := range s.injections() {
		if !lightKinds[in.Kind] {
			return false
		}
	}
	return true
}

// drive runs the job's steps in real time and returns the onset of its
// first injection (zero without one).
func drive(ctx context.Context, j *job, opts Options, sender *otlpSender) (time.Time, error) {
	var onset time.Time
	next := time.Now()
	for step := 0; step < j.sc.Steps; step++ {
		start := next
		next = start.Add(opts.StepPeriod)
		var injected []Injection
		for _, in := range j.sc.injections() {
			if step == in.AtStep {
				injected = append(injected, *in)
			}
		}
		if onset.IsZero() && len(injected) > 0 {
			onset = start
		}
		for _, nd := range j.nodes {
			nd.injectOnce(step)
		}
		ranks := j.simulateStep(step)
		select {
		case <-ctx.Done():
			return onset, ctx.Err()
		case <-time.After(time.Until(next)):
		}
		// The step ends where the next begins, however late this
		// goroutine wakes: a late wake-up must not stretch the step over
		// its successor (stepspan would fold the successor's collectives
		// into it, and a busy machine would make link stragglers).
		spans, err := j.finishStep(ctx, step, start, next, ranks, opts, sender)
		if err != nil {
			return onset, err
		}
		j.sentAt = append(j.sentAt, time.Now())
		if opts.OnStep != nil {
			opts.OnStep(StepDone{JobID: j.id, Step: step, Steps: j.sc.Steps, Start: start, Spans: spans, Injected: injected})
		}
	}
	return onset, nil
}

// finishStep advances the hardware, writes the inputs of a step that ran
// from start to end and sends its step spans; it returns how many it sent.
func (j *job) finishStep(ctx context.Context, step int, start, end time.Time, ranks []rankStep, opts Options, sender *otlpSender) (int, error) {
	for _, nd := range j.nodes {
		nd.tick(step)
		if !opts.lightInputs() {
			if err := nd.writeSysfs(); err != nil {
				return 0, err
			}
		}
	}
	if j.stopped {
		// A hung or crashed job's ranks keep dumping their flight
		// recorders: the one that stopped shows as stopped.
		if !opts.lightInputs() {
			for _, nd := range j.nodes {
				if nd.frDir == "" || nd.isSilent() {
					continue
				}
				if err := nd.rewriteDumps(); err != nil {
					return 0, err
				}
			}
		}
		return 0, nil
	}
	if !opts.lightInputs() {
		if err := j.recordFlight(step, start, end, ranks); err != nil {
			return 0, err
		}
	}
	if j.stopped || j.sc.NoStepSpans {
		return 0, nil // the step never finished, or the job sends none
	}
	nodes := j.stepRecords(step, start, end, ranks, opts.lightInputs())
	if opts.StepSink != nil {
		sent := 0
		for _, nr := range nodes {
			if err := opts.StepSink(ctx, nr.host, nr.records); err != nil {
				return sent, fmt.Errorf("testbed: step sink of %s: %w", nr.host, err)
			}
			sent += len(nr.records)
		}
		return sent, nil
	}
	batches := stepSpans(nodes)
	spans := 0
	for _, b := range batches {
		spans += b.td.SpanCount()
	}
	return spans, sender.send(ctx, batches)
}

// recordFlight appends the step's collectives to every rank's flight
// recorder and writes the dumps. A hang or a timed-out collective (after a
// DBE) stops the job.
func (j *job) recordFlight(step int, start, end time.Time, ranks []rankStep) error {
	var hung, failed *Injection // the injections that stop the job at this step
	for _, in := range j.sc.injections() {
		switch {
		case in.Kind == InjectHang && step == in.AtStep:
			hung = in
		case in.Kind == InjectDBE && step == in.AtStep+in.DelaySteps:
			failed = in
		}
	}
	hangAt, timeoutAt := hung != nil, failed != nil
	span := end.Sub(start)
	for _, r := range ranks {
		nd := j.nodes[r.node]
		if nd.isSilent() {
			continue
		}
		entries := make([]frEntry, 0, collectivesPerStep)
		off := j.clockOffset(r.node) // the node's clock (data_lag, clock_skew)
		for c := 0; c < collectivesPerStep; c++ {
			created := start.Add(time.Duration(c+1) * span / (collectivesPerStep + 2))
			if j.sc.timed() {
				created = start.Add(r.enqueue[c])
			}
			e := frEntry{
				seq:       j.collSeq + int64(c) + 1,
				created:   created.Add(off),
				duration:  r.collectives[c],
				state:     "completed",
				retired:   true,
				timeoutMs: 600000,
			}
			if hangAt || timeoutAt {
				if c > 0 {
					break // nothing after the collective that never finishes
				}
				e.state, e.retired = "started", false
				if hangAt && hung.targets(r.node, r.gpu) {
					break // the hung rank never enqueues it
				}
				if timeoutAt && failed.targets(r.node, r.gpu) {
					// the watchdog gave up on it on the rank whose GPU failed
					e.retired, e.timeoutMs = true, 1000
				}
			}
			entries = append(entries, e)
		}
		nd.recordCollectives(r.rank, entries)
		if err := nd.writeDump(r.rank, time.Time{}); err != nil {
			return err
		}
	}
	j.collSeq += collectivesPerStep
	if hangAt || timeoutAt {
		j.stopped = true
	}
	return nil
}

func randomTraceID() pcommon.TraceID {
	var id pcommon.TraceID
	_, _ = rand.Read(id[:])
	return id
}

func randomSpanID() pcommon.SpanID {
	var id pcommon.SpanID
	_, _ = rand.Read(id[:])
	return id
}

// otlpSender posts traces to the collector's OTLP/HTTP receiver, as the
// training SDK does.
type otlpSender struct {
	url    func(host string) string
	client *http.Client
}

func (s *otlpSender) send(ctx context.Context, batches []hostTraces) error {
	// Nodes that share an endpoint (the in-process collector) share
	// requests of up to maxSpansPerRequest spans: at 16,384 ranks one
	// request per node would be 2,048 requests a step.
	const maxSpansPerRequest = 1024
	var pending ptrace.Traces
	pendingURL := ""
	flush := func() error {
		if pendingURL == "" {
			return nil
		}
		err := s.post(ctx, pendingURL, pending)
		pendingURL = ""
		return err
	}
	for _, ht := range batches {
		url := s.url(ht.host)
		if url != pendingURL || pending.SpanCount()+ht.td.SpanCount() > maxSpansPerRequest {
			if err := flush(); err != nil {
				return err
			}
			pending, pendingURL = ptrace.NewTraces(), url
		}
		ht.td.ResourceSpans().MoveAndAppendTo(pending.ResourceSpans())
	}
	return flush()
}

func (s *otlpSender) post(ctx context.Context, url string, td ptrace.Traces) error {
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		return fmt.Errorf("testbed: encoding step spans: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("testbed: sending step spans: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("testbed: sending step spans: HTTP %d", resp.StatusCode)
	}
	return nil
}

// median of ds; NaN when empty.
func median(ds []float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), ds...)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// remapNodes moves the injection and the expectations onto the scenario's
// nodes when a run shrinks the job (node n becomes n mod Nodes).
func (sc *Scenario) remapNodes() {
	if sc.Inject != nil {
		in := *sc.Inject
		in.Node %= sc.Nodes
		sc.Inject = &in
	}
	injects := make([]Injection, len(sc.Injects))
	for i, in := range sc.Injects {
		in.Node %= sc.Nodes
		injects[i] = in
	}
	sc.Injects = injects
	remap := func(es []Expectation) []Expectation {
		out := make([]Expectation, len(es))
		for i, e := range es {
			if e.Node != nil {
				n := *e.Node % sc.Nodes
				e.Node = &n
			}
			out[i] = e
		}
		return out
	}
	sc.Expect, sc.Allow = remap(sc.Expect), remap(sc.Allow)
}

// scratchRoot is where a run keeps its simulated sysfs trees and dumps when
// Options.Dir is empty: memory (/dev/shm) where the machine has it. Every
// node rewrites its sysfs files and each rank its dump every step, and on a
// disk each create costs ten times what it costs in memory: on the 2-core CI
// machine that alone was half the suite's CPU, which slowed the simulated
// steps the detection is measured in.
func scratchRoot() string {
	const shm = "/dev/shm"
	if st, err := os.Stat(shm); err == nil && st.IsDir() {
		if f, err := os.CreateTemp(shm, "gpusim-probe-"); err == nil {
			name := f.Name()
			_ = f.Close()
			_ = os.Remove(name)
			return shm
		}
	}
	return os.TempDir()
}
