package remediationexporter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/webhookverify"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memPlatform is an in-memory platform behind the actuator seam: enough to
// test the exporter's decisions. The real platforms are tested against real
// servers in their own packages.
type memPlatform struct {
	mu          sync.Mutex
	name        string
	quarantines []actuator.Request
	releases    []actuator.Request
	failNext    int              // the next calls fail with an error
	outcome     actuator.Outcome // of Quarantine; "" = Applied
	calledAt    []time.Time      // for the benchmark
	block       chan struct{}    // when set, Quarantine waits on it
	entered     chan struct{}    // signalled when Quarantine is entered
	breaker     *memBreaker
	// skips: Check leaves these nodes alone (ghosts, no GPU, ...).
	skips map[string]actuator.Outcome
	// gpuNodes is Check's GPU node count; 0 means 10000. held are the
	// nodes quarantined and not released: Check's Quarantined.
	gpuNodes int
	held     map[string]bool
	checkErr error // Check fails with it
}

func newMemPlatform(budget int) *memPlatform {
	return &memPlatform{name: "kubernetes", breaker: &memBreaker{budget: budget, nodes: map[string]bool{}}}
}

func (p *memPlatform) Name() string { return p.name }

func (p *memPlatform) Quarantine(ctx context.Context, req actuator.Request) (actuator.Result, error) {
	now := time.Now()
	if p.entered != nil {
		p.entered <- struct{}{}
	}
	if p.block != nil {
		select {
		case <-p.block:
		case <-ctx.Done():
			return actuator.Result{}, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calledAt = append(p.calledAt, now)
	if p.failNext > 0 {
		p.failNext--
		return actuator.Result{}, errAPIServerDown
	}
	p.quarantines = append(p.quarantines, req)
	if p.outcome != "" {
		return actuator.Result{Outcome: p.outcome, Detail: "test"}, nil
	}
	p.hold(req.Node, true)
	return actuator.Result{Outcome: actuator.Applied, Detail: "cordoned"}, nil
}

func (p *memPlatform) Release(_ context.Context, req actuator.Request) (actuator.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releases = append(p.releases, req)
	p.hold(req.Node, false)
	return actuator.Result{Outcome: actuator.Applied, Detail: "uncordoned"}, nil
}

func (p *memPlatform) Breaker() actuator.Breaker { return p.breaker }

func (p *memPlatform) counts() (q, r int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.quarantines), len(p.releases)
}

var errAPIServerDown = &apiError{}

type apiError struct{}

func (*apiError) Error() string { return "connection refused" }

type memBreaker struct {
	mu      sync.Mutex
	budget  int
	nodes   map[string]bool
	tripped bool
	at      map[string]time.Time // when each node was admitted (Refund)
	resets  int                  // Reset calls
}

func (b *memBreaker) Admit(_ context.Context, node string, now time.Time) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nodes[node] {
		return true, nil
	}
	if b.tripped || len(b.nodes) >= b.budget {
		b.tripped = true
		return false, nil
	}
	b.nodes[node] = true
	b.admitted(node, now)
	return true, nil
}

func (b *memBreaker) Tripped(context.Context) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripped, nil
}

func (b *memBreaker) Reset(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tripped, b.nodes = false, map[string]bool{}
	b.resets++
	return nil
}

func (b *memBreaker) State(context.Context, time.Time) (actuator.BreakerState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return actuator.BreakerState{Tripped: b.tripped, Used: len(b.nodes), Budget: b.budget, Window: time.Hour}, nil
}

type flagLeader struct {
	mu     sync.Mutex
	leader bool
}

func (l *flagLeader) IsLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leader
}

func (l *flagLeader) set(v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leader = v
}

// fakeClock fires AfterFunc callbacks when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
	fired   bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 3, 14, 9, 30, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.fired || t.stopped {
			return false
		}
		t.stopped = true
		return true
	}
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.fired && !t.stopped {
			n++
		}
	}
	return n
}

// Advance moves time on and runs the callbacks that came due, in the
// caller's goroutine.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if !t.fired && !t.stopped && !t.at.After(c.now) {
			t.fired = true
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// AdvanceLate moves time on and marks the callbacks that came due as
// fired, but returns them instead of running them: a real timer that fired
// and waits for the exporter's lock while the test goes on.
func (c *fakeClock) AdvanceLate(d time.Duration) []func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if !t.fired && !t.stopped && !t.at.After(c.now) {
			t.fired = true
			due = append(due, t.f)
		}
	}
	return due
}

// hook is a webhook receiver that checks every signature.
type hook struct {
	mu         sync.Mutex
	payloads   []webhook.Payload
	deliveries []string // the delivery id of each payload
	badSigs    int
	fail       int
}

func (h *hook) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	// The exporter stamps with the fake clock: check the signature at the
	// request's own time (the window is webhookverify's to test).
	ts, _ := strconv.ParseInt(req.Header.Get(webhook.HeaderTimestamp), 10, 64)
	if _, err := webhookverify.Verify([]byte(testSecret), req.Header, body, time.Unix(ts, 0)); err != nil {
		h.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if h.fail > 0 {
		h.fail--
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	var p webhook.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.payloads = append(h.payloads, p)
	h.deliveries = append(h.deliveries, req.Header.Get(webhook.HeaderDelivery))
}

func (h *hook) got() []webhook.Payload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]webhook.Payload(nil), h.payloads...)
}

const testSecret = "hook-secret"

type harness struct {
	t        *testing.T
	exp      *remediationExporter
	platform *memPlatform
	clock    *fakeClock
	hook     *hook
	auditLog string
	logs     *observer.ObservedLogs
	// metrics reads the exporter's own telemetry (telemetry_test.go).
	metrics *sdkmetric.ManualReader
	// console is the fault console the exporter finds when its config
	// names one (console_test.go).
	console *recordingConsole
}

type harnessOpt func(*Config, *dependencies)

func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, platform: newMemPlatform(1000), clock: newFakeClock(), hook: &hook{}, console: &recordingConsole{}}
	srv := httptest.NewServer(h.hook)
	t.Cleanup(srv.Close)
	cfg := createDefaultConfig().(*Config)
	cfg.DryRun = false
	cfg.Webhook.Endpoint = srv.URL
	cfg.Webhook.Secret = testSecret
	cfg.Webhook.Insecure = true // httptest serves http://
	h.auditLog = filepath.Join(t.TempDir(), "audit.jsonl")
	cfg.AuditFile = h.auditLog
	deps := dependencies{platform: h.platform, clock: h.clock, sleep: func(context.Context, time.Duration) error { return nil }}
	for _, o := range opts {
		o(cfg, &deps)
	}
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zapcore.InfoLevel)
	h.logs = logs
	set := componenttest.NewNopTelemetrySettings()
	set.Logger = zap.New(core)
	h.metrics = sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.metrics))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	set.MeterProvider = mp
	exp, err := newRemediationExporter(cfg, set, deps)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), consoleHost(cfg, h.console)))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	h.exp = exp
	return h
}

func (h *harness) consume(recs ...fault.Record) error {
	return h.exp.ConsumeLogs(context.Background(), logsOf(semconv.ScopeFaultRecords, recs...))
}

func (h *harness) audit() []audit.Entry {
	h.t.Helper()
	b, err := os.ReadFile(h.auditLog)
	require.NoError(h.t, err)
	var out []audit.Entry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e audit.Entry
		require.NoError(h.t, json.Unmarshal([]byte(line), &e), line)
		out = append(out, e)
	}
	return out
}

// auditFor returns the entries of one step with one decision.
func (h *harness) auditFor(step, decision string) []audit.Entry {
	var out []audit.Entry
	for _, e := range h.audit() {
		if e.Step == step && e.Decision == decision {
			out = append(out, e)
		}
	}
	return out
}

func logsOf(scope string, recs ...fault.Record) plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName(scope)
	for _, r := range recs {
		r.ToLogRecord(sl.LogRecords().AppendEmpty())
	}
	return ld
}

// faultOn builds a record of typ on node (one GPU), with a stable id.
func faultOn(typ fault.Type, sev fault.Severity, node string, state fault.State) fault.Record {
	onset := time.Date(2025, 3, 14, 9, 26, 40, 0, time.UTC)
	r := fault.Record{
		Type: typ, State: state, Severity: sev, Confidence: 0.9, Rule: "test_rule", Action: fault.ActionCordon,
		BlastRadius: fault.BlastGPU, Entity: fault.Entity{Kind: fault.EntityGPU, Key: "GPU-" + node + "-5"},
		HostName: node, GPUUUID: "GPU-" + node + "-5", JobID: "llama-70b", FirstSeen: onset, LastSeen: onset.Add(35 * time.Second),
		Summary: string(typ) + " on " + node,
	}
	switch typ {
	case fault.TypeGPUMemoryDBE:
		r.XID = 48
	case fault.TypeGPUFellOffBus:
		r.XID, r.Action = 79, fault.ActionDrain
	}
	r.ID = r.ComputeID(fault.DefaultBucket)
	return r
}

func withState(r fault.Record, s fault.State) fault.Record {
	r.State = s
	return r
}

// auditEntries returns the entries of the audit file that match.
func auditEntries(t *testing.T, path string, match func(audit.Entry) bool) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	for _, e := range readAudit(t, path) {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// readAudit parses the audit file's JSON lines; a missing file is empty.
func readAudit(t *testing.T, path string) []audit.Entry {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []audit.Entry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e audit.Entry
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		out = append(out, e)
	}
	return out
}
