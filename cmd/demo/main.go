// Command demo runs the whole otelcol-gpu pipeline on one machine, without
// a GPU or any backend (make demo): a Kafka-protocol broker on loopback
// (test/kfakebroker), one agent binary per simulated node, the gateway
// binary, and the fault-injection simulator of test/testbed driving a
// 64-rank training job on 8 nodes x 8 GPUs (dcgm-exporter pages, sysfs
// trees, flight-recorder dumps, step records). The job's step records go
// through the project's Python module, as a training script's would: one
// `python3 sdk/python/otelcol_gpu_step.py replay` process per node reads
// the node's records as JSON lines and posts them as train.step spans to
// the node's agent (so python3 >= 3.8 is needed; -python names it). It
// injects a compute straggler and an NVLink degradation (scenario.yaml) and
// prints, as they happen, the fault records read from the gpu_faults topic
// and the remediation exporter's dry-run decisions. It stops by itself,
// prints a summary (with the step records the Python module sent and
// dropped) and leaves every process's log, the audit file and the fault
// records in its output directory. The gateway serves the fault console
// (docs/console.md) on -console with a fresh token in the output
// directory; -hold keeps everything up after the run to look at it. The
// remediation exporter's repair loop runs too (-repair-config, a dry run:
// the quarantined node moves through the steps as if each were done), and
// the summary prints each node's steps and time to recovery from the audit
// file next to the gateway's otelcol_remediation_time_to_recovery_seconds
// and otelcol_remediation_lifecycle_step_seconds, read from its telemetry
// endpoint at the end of the run (kept in gateway-metrics.prom).
//
//	make demo
//	go run ./cmd/demo -steps 24 -step 1s -nodes 2   # shorter, smaller
package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

//go:embed scenario.yaml
var defaultScenario []byte

type config struct {
	out, bin, broker        string
	agentConfig, gatewayCfg string
	scenarioFile            string
	python, sdk             string
	steps, nodes            int
	step, grace             time.Duration
	seed                    uint64
	allUpdates              bool
	// console: the fault console's listen address ("" or "off": none);
	// consoleCfg: the gateway fragment that turns it on; hold: after the
	// run, keep everything up until interrupted, to look at the console.
	console, consoleCfg string
	hold                bool
	// repairCfg: the gateway fragment that turns the repair loop on ("" or
	// "off": the loop stays off).
	repairCfg string
}

func main() {
	var c config
	flag.StringVar(&c.out, "out", "", "output directory: logs, audit file, fault records (default: a new temporary directory)")
	flag.IntVar(&c.steps, "steps", 0, "training steps to simulate (default: scenario.yaml's, 40)")
	flag.DurationVar(&c.step, "step", 2*time.Second, "wall-clock length of a step")
	flag.Uint64Var(&c.seed, "seed", 0, "seed of the simulation (0: random; the summary prints it)")
	flag.StringVar(&c.bin, "bin", "bin", "directory of otelcol-gpu-agent and otelcol-gpu-gateway (make build)")
	flag.StringVar(&c.broker, "broker", filepath.Join("_build", "kfakebroker"), "the kfakebroker binary (go build -o _build/kfakebroker ./test/kfakebroker)")
	flag.StringVar(&c.agentConfig, "agent-config", filepath.Join("distributions", "agent", "config.yaml"), "agent configuration")
	flag.StringVar(&c.gatewayCfg, "gateway-config", filepath.Join("distributions", "gateway", "config.yaml"), "gateway configuration")
	flag.StringVar(&c.scenarioFile, "scenario", "", "scenario file (default: the built-in cmd/demo/scenario.yaml)")
	flag.IntVar(&c.nodes, "nodes", 8, "simulated nodes of 8 GPUs (the job's ranks: 8 x nodes)")
	flag.BoolVar(&c.allUpdates, "all-updates", false, "print every update record (default: only those that change a fault's severity or action; faults.jsonl has all)")
	flag.StringVar(&c.console, "console", "localhost:8787", `the fault console's address on the gateway ("off": none); its token is written to <out>/console-token`)
	flag.StringVar(&c.consoleCfg, "console-config", filepath.Join("distributions", "gateway", "console.yaml"), "the gateway configuration fragment that turns the console on")
	flag.StringVar(&c.repairCfg, "repair-config", filepath.Join("cmd", "demo", "gateway-repair.yaml"), `the gateway configuration fragment that turns the remediation exporter's repair loop on, in a dry run ("off": none)`)
	flag.BoolVar(&c.hold, "hold", false, "after the run, keep the gateway, its console and the agents up until interrupted (Ctrl-C)")
	flag.DurationVar(&c.grace, "grace", 45*time.Second, "after the last step, how long to wait for expected faults and their remediation decisions")
	flag.StringVar(&c.python, "python", "python3", "the Python interpreter (>= 3.8) that runs the SDK's replay, one process per node")
	flag.StringVar(&c.sdk, "sdk", filepath.Join("sdk", "python", "otelcol_gpu_step.py"), "the Python module the step records go through")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, c, os.Stdout)
	stop()
	os.Exit(code)
}

// run returns the exit code: 0 when every expected fault opened, 1 when
// one did not or the run failed.
func run(ctx context.Context, c config, stdout io.Writer) int {
	d, err := newDemo(c, stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	err = d.run(ctx)
	missing := d.summary(err)
	if err != nil || missing > 0 {
		return 1
	}
	return 0
}

// demo is one run: its processes, what it has seen and the terminal.
type demo struct {
	cfg      config
	term     io.Writer
	outDir   string
	logDir   string
	audit    string
	faultsTo string
	opts     testbed.Options
	scenario testbed.Scenario
	began    time.Time

	procs   procs
	cluster *testbed.Cluster
	topo    *topology
	steps   *pythonSteps
	python  string // the interpreter's path

	mu         sync.Mutex
	onsets     map[int]time.Time // by index into scenario's injections
	records    []fault.Record
	arrivals   []time.Time
	opened     map[string]bool         // fault ids seen open
	last       map[string]fault.Record // the latest record of each fault id
	updates    int                     // update records not printed
	faultsFile *os.File
	spans      int
	lastStep   int
	decisions  []auditEntry // dry_run, acted, failed
	repairs    []auditEntry // the repair loop's entries (step repair)
	// metrics: the gateway's repair loop histograms read at the end of the
	// run; nil with metricsErr saying why
	metrics    *recoveryMetrics
	metricsErr error
	skipped    int
	problems   []string
	// pySummary: what the Python replays reported; nil until they finished
	pySummary *replaySummary
}

func newDemo(c config, term io.Writer) (*demo, error) {
	doc := defaultScenario
	if c.scenarioFile != "" {
		var err error
		if doc, err = os.ReadFile(c.scenarioFile); err != nil {
			return nil, err
		}
	}
	scs, err := testbed.ParseScenarios(doc)
	if err != nil {
		return nil, err
	}
	if len(scs) != 1 {
		return nil, fmt.Errorf("the scenario file must hold one scenario (one job), not %d", len(scs))
	}
	sc := scs[0]
	if c.steps > 0 {
		sc.Steps = c.steps
	}
	if c.nodes <= 0 || c.step <= 0 {
		return nil, errors.New("-nodes and -step must be positive")
	}
	if c.nodes != sc.Nodes {
		// the testbed renumbers nodes n mod nodes (Options.Ranks)
		sc.Nodes = c.nodes
		if sc.Inject != nil {
			in := *sc.Inject
			in.Node %= c.nodes
			sc.Inject = &in
		}
		for i := range sc.Injects {
			sc.Injects[i].Node %= c.nodes
		}
		for _, es := range [][]testbed.Expectation{sc.Expect, sc.Allow} {
			for i := range es {
				if es[i].Node != nil {
					n := *es[i].Node % c.nodes
					es[i].Node = &n
				}
			}
		}
	}
	// The steps may have changed: write the scenario back for the testbed,
	// which validates it again (an injection after the last step fails).
	yamlDoc, err := yaml.Marshal(map[string]any{"scenarios": []testbed.Scenario{sc}})
	if err != nil {
		return nil, err
	}
	if _, err := testbed.ParseScenarios(yamlDoc); err != nil {
		return nil, fmt.Errorf("with -steps %d: %w", sc.Steps, err)
	}

	out := c.out
	if out == "" {
		if out, err = os.MkdirTemp("", "otelcol-gpu-demo-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if out, err = filepath.Abs(out); err != nil {
		return nil, err
	}
	d := &demo{cfg: c, term: term, outDir: out, logDir: filepath.Join(out, "logs"),
		audit: filepath.Join(out, "remediation-audit.jsonl"), faultsTo: filepath.Join(out, "faults.jsonl"),
		scenario: sc, began: time.Now(), onsets: map[int]time.Time{}, opened: map[string]bool{}, last: map[string]fault.Record{}, lastStep: -1}
	for _, dir := range []string{d.logDir, filepath.Join(out, "sim"), filepath.Join(out, "state")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	// No fallback to the simulator's own sender: the demo shows the module.
	if d.python, err = exec.LookPath(c.python); err != nil {
		return nil, fmt.Errorf("the step records go through the Python module %s, which needs -python %s (>= 3.8): %w", c.sdk, c.python, err)
	}
	if _, err := os.Stat(c.sdk); err != nil {
		return nil, fmt.Errorf("the Python module (-sdk) is missing: %w", err)
	}
	if d.repairOn() {
		if _, err := os.Stat(c.repairCfg); err != nil {
			return nil, fmt.Errorf("the gateway's repair loop fragment (-repair-config; off: none) is missing: %w", err)
		}
	}
	for _, bin := range []string{d.binary("otelcol-gpu-agent"), d.binary("otelcol-gpu-gateway"), c.broker} {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%s is missing (make demo builds it): %w", bin, err)
		}
	}
	d.opts = testbed.DefaultOptions()
	d.opts.Seed = c.seed
	d.opts.StepPeriod = c.step
	d.opts.ScenariosYAML = yamlDoc
	d.opts.Dir = filepath.Join(out, "sim")
	d.opts.OnStep = d.onStep
	d.opts.StepSink = func(ctx context.Context, host string, records []testbed.StepRecord) error {
		return d.steps.send(ctx, host, records) // d.steps is started before the first step
	}
	return d, nil
}

func (d *demo) binary(name string) string { return filepath.Join(d.cfg.bin, name) }

// say prints one line, stamped with the seconds since the demo began.
// Callers hold d.mu or are the only goroutine printing.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.term, "[%6.1fs] %s\n", time.Since(d.began).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context) (err error) {
	d.cluster, err = testbed.NewCluster(d.opts)
	if err != nil {
		return err
	}
	defer d.cluster.Close()
	nodes := d.cluster.Nodes()
	d.topo = newTopology(nodes, d.scenario.GPUsPerNode)
	if d.faultsFile, err = os.Create(d.faultsTo); err != nil {
		return err
	}
	defer d.faultsFile.Close()

	d.say("otelcol-gpu demo: job %s, %d nodes x %d GPUs, %d steps of %s, seed %d",
		d.topo.jobID, d.scenario.Nodes, d.scenario.GPUsPerNode, d.scenario.Steps, d.cfg.step, d.cluster.Seed())
	for _, in := range d.injections() {
		d.say("will inject %s at step %d on %s", in.Kind, in.AtStep, d.where(in.Node, in.GPU))
	}
	d.say("output: %s", d.outDir)

	defer d.procs.stopAll(15 * time.Second)
	sink, err := startBackendSink()
	if err != nil {
		return err
	}
	defer sink.close()

	brokerAddr, err := freeAddr()
	if err != nil {
		return err
	}
	if _, err := d.procs.start(0, "kfakebroker", d.logDir, nil, d.cfg.broker,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3"); err != nil {
		return err
	}
	if err := waitFor(ctx, &d.procs, "starting the broker", 30*time.Second, dialCheck(brokerAddr)); err != nil {
		return err
	}
	d.say("broker (kfake) on %s", brokerAddr)

	gwHealth, gwTelemetry, err := freeAddr2()
	if err != nil {
		return err
	}
	gatewayArgs := []string{"--config", d.cfg.gatewayCfg}
	consoleEnv, err := d.consoleSetup()
	if err != nil {
		return err
	}
	if consoleEnv != nil {
		gatewayArgs = append(gatewayArgs, "--config", d.cfg.consoleCfg)
	}
	if d.repairOn() {
		gatewayArgs = append(gatewayArgs, "--config", d.cfg.repairCfg)
	}
	d.metricsErr = errNoTelemetry
	if _, err := d.procs.start(1, "gateway", d.logDir, append([]string{
		"KAFKA_BROKERS=" + brokerAddr,
		"PROMETHEUS_REMOTE_WRITE_URL=" + sink.HTTP + "/api/v1/write",
		"LOKI_OTLP_ENDPOINT=" + sink.HTTP + "/otlp",
		"TEMPO_OTLP_ENDPOINT=" + sink.GRPC,
		"STRAGGLER_DECISION_WAIT=1500ms",
		"REMEDIATION_DRY_RUN=true",
		"REMEDIATION_AUDIT_FILE=" + d.audit,
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(gwTelemetry),
		"OTELCOL_GPU_STORAGE_DIR=" + filepath.Join(d.outDir, "state", "gateway"),
	}, consoleEnv...), d.binary("otelcol-gpu-gateway"), gatewayArgs...); err != nil {
		return err
	}

	endpoints := map[string]string{} // host -> agent OTLP/HTTP base URL
	var hosts, health []string
	for _, n := range nodes {
		var addrs testbed.AgentAddrs
		for _, addr := range []*string{&addrs.Health, &addrs.OTLPHTTP, &addrs.OTLPGRPC, &addrs.Telemetry} {
			if *addr, err = freeAddr(); err != nil {
				return err
			}
		}
		env, err := n.AgentEnv(brokerAddr, filepath.Join(d.outDir, "state", n.Host), addrs, true)
		if err != nil {
			return err
		}
		if _, err := d.procs.start(2, "agent-"+n.Host, d.logDir, env, d.binary("otelcol-gpu-agent"), "--config", d.cfg.agentConfig); err != nil {
			return err
		}
		health = append(health, "http://"+addrs.Health+"/")
		endpoints[n.Host] = "http://" + addrs.OTLPHTTP
		hosts = append(hosts, n.Host)
	}
	if d.steps, err = startPythonSteps(&d.procs, d.logDir, d.python, d.cfg.sdk, endpoints, hosts); err != nil {
		return err
	}
	if err := waitFor(ctx, &d.procs, "starting the gateway", 90*time.Second, httpCheck("http://"+gwHealth+"/")); err != nil {
		return err
	}
	for i, url := range health {
		if err := waitFor(ctx, &d.procs, "starting agent "+nodes[i].Host, 90*time.Second, httpCheck(url)); err != nil {
			return err
		}
	}
	d.say("gateway and %d agents up, %d Python step senders (%s %s replay) started (logs in %s)",
		len(nodes), len(hosts), d.cfg.python, d.cfg.sdk, d.logDir)
	if consoleEnv != nil {
		d.say("fault console: http://%s/ (token in %s; or: otelcol-gpu-ctl --server http://%s --token-file %s faults)",
			d.cfg.console, d.consoleToken(), d.cfg.console, d.consoleToken())
	}

	// Readers of the outputs, until the processes are stopped.
	readCtx, stopReading := context.WithCancel(context.WithoutCancel(ctx))
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		if err := consumeFaults(readCtx, brokerAddr, d.onRecord, d.problem); err != nil {
			d.problem(err)
		}
	}()
	go func() {
		defer readers.Done()
		tailAudit(readCtx, d.audit, d.onDecision, d.problem)
	}()
	defer func() {
		d.procs.stopAll(15 * time.Second) // the gateway syncs the audit file as it stops
		stopReading()
		readers.Wait()
	}()

	// Drive the job; a child that dies ends the run.
	driveCtx, stopDriving := context.WithCancel(ctx)
	defer stopDriving()
	var died *process
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-driveCtx.Done():
				return
			case <-tick.C:
				if p := d.procs.exited(); p != nil {
					died = p
					stopDriving()
					return
				}
			}
		}
	}()
	driveErr := d.cluster.Drive(driveCtx, nil) // Options.StepSink sends the steps
	if driveErr == nil {
		driveErr = d.finishPython()
	}
	if driveErr == nil {
		d.mu.Lock()
		d.say("all %d steps sent; waiting up to %s for the expected faults and their remediation decisions", d.scenario.Steps, d.cfg.grace)
		d.mu.Unlock()
		driveErr = d.settle(driveCtx)
	}
	if driveErr == nil && d.cfg.hold {
		d.say("holding: the gateway, its console and the agents stay up until interrupted (Ctrl-C)")
		select {
		case <-ctx.Done():
		case <-driveCtx.Done(): // a child died
		}
	}
	stopDriving()
	<-watchDone
	if died == nil && d.repairOn() { // before the deferred stopAll
		d.readMetrics(ctx, "http://"+gwTelemetry+"/metrics")
	}
	if died != nil {
		return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", died.Name(), died.Err(), died.LogPath(), died.tail(20))
	}
	return driveErr
}

// consoleToken is the file holding the console's bearer token.
func (d *demo) consoleToken() string { return filepath.Join(d.outDir, "console-token") }

// consoleSetup writes a fresh random token for the fault console and
// returns the gateway's console environment; nil when the console is off.
func (d *demo) consoleSetup() ([]string, error) {
	if d.cfg.console == "" || d.cfg.console == "off" {
		return nil, nil
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("console token: %w", err)
	}
	if err := os.WriteFile(d.consoleToken(), []byte(hex.EncodeToString(b[:])+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("console token: %w", err)
	}
	return []string{
		"OTELCOL_GPU_CONSOLE_ENDPOINT=" + d.cfg.console,
		"OTELCOL_GPU_CONSOLE_TOKEN_FILE=" + d.consoleToken(),
	}, nil
}

// finishPython ends the Python replays' input and reports what they sent;
// the records are then with the agents, before the grace period starts.
func (d *demo) finishPython() error {
	sum, written, err := d.steps.finish(30 * time.Second)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("python step senders: %w", err)
	}
	d.pySummary = &sum
	d.say("%s", d.pythonLine(written))
	return nil
}

// pythonLine is the demo's account of the step records the Python module
// sent (the end-to-end test reads it).
func (d *demo) pythonLine(written int) string {
	s := d.pySummary
	return fmt.Sprintf("step records: %d sent through the Python module (otelcol_gpu_step), %d dropped (%d handed to %d replay processes)",
		s.Sent, s.Dropped, written, len(d.steps.byHost))
}

func freeAddr2() (string, string, error) {
	a, err := freeAddr()
	if err != nil {
		return "", "", err
	}
	b, err := freeAddr()
	return a, b, err
}

func port(addr string) string {
	_, p, _ := strings.Cut(addr, ":")
	return p
}

// settle waits after the last step until every expected fault opened and
// has a remediation decision, or the grace period ends.
func (d *demo) settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.grace)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if d.complete() {
			// a moment for the updates and decisions that follow an open
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second):
			}
			if d.repairsPending() == 0 { // a loop the moment started
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil // the summary says what is missing
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// complete: every expectation found, every expected fault's node has a
// decision and every repair loop started has ended.
func (d *demo) complete() bool {
	if d.repairsPending() > 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	rep := d.cluster.Score(d.records, d.arrivals)
	for _, s := range rep.Scenarios {
		for _, f := range s.Found {
			if f < 0 {
				return false
			}
		}
	}
	for _, e := range d.scenario.Expect {
		if e.Node == nil {
			continue
		}
		host := d.host(*e.Node)
		decided := false
		for _, dec := range d.decisions {
			decided = decided || (dec.Node == host && dec.FaultType == string(e.Type))
		}
		if !decided {
			return false
		}
	}
	return true
}

func (d *demo) injections() []testbed.Injection {
	var out []testbed.Injection
	if d.scenario.Inject != nil {
		out = append(out, *d.scenario.Inject)
	}
	return append(out, d.scenario.Injects...)
}

func (d *demo) host(node int) string {
	for h, i := range d.topo.hostIndex {
		if i == node {
			return h
		}
	}
	return fmt.Sprintf("node %d", node)
}

func (d *demo) where(node, gpu int) string {
	return fmt.Sprintf("node %s GPU %d (rank %d)", d.host(node), gpu, node*d.scenario.GPUsPerNode+gpu)
}

// onStep prints the progress line of a step and the injections it began.
func (d *demo) onStep(s testbed.StepDone) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, in := range s.Injected {
		for i, known := range d.injections() {
			if known == in {
				d.onsets[i] = s.Start
			}
		}
		d.say("INJECT %s on %s", in.Kind, d.where(in.Node, in.GPU))
	}
	d.spans += s.Spans
	d.lastStep = s.Step
	d.say("step %d/%d  step records %d  faults so far %d (%d records)", s.Step+1, s.Steps, d.spans, len(d.opened), len(d.records))
}

// onsetFor is the onset of the injection a record is about: the one on
// its GPU, else on its node, else the first; "" before that onset.
func (d *demo) onsetFor(p place, at time.Time) string {
	best := -1
	for i, in := range d.injections() {
		if _, started := d.onsets[i]; !started {
			continue
		}
		switch {
		case in.Node == p.node && in.GPU == p.gpu:
			best = i
		case in.Node == p.node && (best < 0 || d.injections()[best].Node != p.node):
			best = i
		case best < 0:
			best = i
		}
	}
	if best < 0 {
		return " -"
	}
	return fmt.Sprintf("%+.1fs", at.Sub(d.onsets[best]).Seconds())
}

func (d *demo) onRecord(r fault.Record, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records = append(d.records, r)
	d.arrivals = append(d.arrivals, at)
	if r.State == fault.StateOpen {
		d.opened[r.ID] = true
	}
	if line, err := recordJSON(r, at); err == nil {
		_, _ = d.faultsFile.Write(append(line, '\n'))
	}
	prev, seen := d.last[r.ID]
	d.last[r.ID] = r
	if r.State == fault.StateUpdate && seen && !d.cfg.allUpdates &&
		prev.Severity == r.Severity && prev.Action == r.Action {
		d.updates++ // new evidence every evaluation while the fault lasts
		return
	}
	p := d.topo.locate(r)
	d.say("%s", faultLine(r, p, d.onsetFor(p, at)))
}

func (d *demo) onDecision(e auditEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.Decision == "skipped" {
		d.skipped++ // duplicates of a fault already decided, mostly
		return
	}
	if e.Step == "repair" {
		d.repairs = append(d.repairs, e)
	} else {
		d.decisions = append(d.decisions, e)
	}
	d.say("%s", auditLine(e))
}

func (d *demo) problem(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.problems = append(d.problems, err.Error())
	d.say("problem: %v", err)
}
