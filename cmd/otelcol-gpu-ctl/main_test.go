package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/faultconsoletest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const token = faultconsoletest.Token

type fixture struct {
	url       string
	tokenFile string
	ctrl      *consoletest.Controller
	console   console.Console
}

// newFixture starts the real extension (faultconsoletest): two faults, a 16-rank job with rank 5 straggling
// in steps 8-10, node-3 quarantined and a tripped breaker.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	fc := faultconsoletest.Start(t, "9.9.9", func(cfg *faultconsoleextension.Config) {
		cfg.TraceURL = "http://tempo.local/trace/{trace_id}"
	})
	ext, tokenFile := fc.Extension, fc.TokenFile
	c := ext.(console.Console)
	onset := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	c.RecordFault(console.Fault{ID: "f-xid-79", Type: "xid_79", Severity: "P1", State: console.StateOpen, Node: "node-3", GPU: "GPU-aaaa",
		Job: "llama", Attempt: 2, Rank: 5, Step: 9, FirstSeen: onset, LastSeen: onset, Summary: "GPU fell off the bus",
		Evidence: map[string]string{"xid": "79", "pci": "0000:3b:00.0"}, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Decision: "acted", Action: "cordon,taint", Reason: "P1"})
	c.RecordFault(console.Fault{ID: "f-ecc-old", Type: "ecc_dbe", Severity: "P2", State: console.StateResolved, Node: "node-1",
		Rank: -1, Step: -1, FirstSeen: onset.Add(-time.Hour), LastSeen: onset.Add(-time.Minute), Decision: "dry_run"})
	for st := int64(1); st <= 10; st++ {
		for r := int64(0); r < 16; r++ {
			s := console.Step{Job: "llama", Attempt: 2, Step: st, Rank: r, Node: "node-" + string(rune('0'+r/4)), Compute: 100 * time.Millisecond, Duration: 120 * time.Millisecond}
			if r == 5 && st >= 8 {
				s.Compute, s.Verdict, s.Score = 190*time.Millisecond, "straggler", 6
			}
			c.RecordStep(s)
		}
	}
	ctrl := consoletest.New(console.Breaker{Tripped: true, Used: 4, Budget: 4, Window: 30 * time.Minute,
		History: []console.BreakerEvent{{Time: onset, Event: "tripped"}}},
		console.QuarantinedNode{Node: "node-3", FaultIDs: []string{"f-xid-79"}, Actions: []string{"cordon", "taint"}, Reason: "P1 xid_79", Since: onset})
	c.Attach(ctrl)
	t.Setenv(envServer, fc.BaseURL)
	t.Setenv(envToken, "")
	t.Setenv("USER", "tester")
	return &fixture{url: fc.BaseURL, tokenFile: tokenFile, ctrl: ctrl, console: c}
}

func (f *fixture) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"--token-file", f.tokenFile}, args...), &o, &e)
	return code, o.String(), e.String()
}

func TestFaultsTable(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := f.run(t, "faults")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	assert.Regexp(t, `^SEVERITY\s+TYPE\s+NODE\s+GPU\s+JOB\s+RANK\s+FIRST SEEN\s+STATE\s+DECISION\s+ACTION\s+ACK\s+ID$`, lines[0])
	assert.Regexp(t, `^P1\s+xid_79\s+node-3\s+GPU-aaaa\s+llama#2\s+5\s+2026-03-01 10:00:00Z\s+open\s+acted\s+cordon,taint\s+-\s+f-xid-79$`, lines[1])

	code, out, _ = f.run(t, "faults", "--all")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "f-ecc-old")
	assert.Less(t, strings.Index(out, "f-xid-79"), strings.Index(out, "f-ecc-old"), "newest first")

	code, out, _ = f.run(t, "fault", "f-xid-79")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^trace\s+http://tempo.local/trace/4bf92f3577b34da6a3ce929d0e0e4736$`, out)
	assert.Regexp(t, `(?m)^evidence.pci\s+0000:3b:00.0$`, out)
}

func TestJSON(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := f.run(t, "--json", "faults", "--all")
	require.Equal(t, 0, code, errOut)
	var fs consoleclient.Faults
	require.NoError(t, json.Unmarshal([]byte(out), &fs))
	require.Len(t, fs.Faults, 2)
	assert.Equal(t, "f-xid-79", fs.Faults[0].ID)
	// The flag also works after the command.
	code, out, _ = f.run(t, "breaker", "--json")
	require.Equal(t, 0, code)
	var b consoleclient.Breaker
	require.NoError(t, json.Unmarshal([]byte(out), &b))
	assert.Equal(t, "tripped", b.State)
}

func TestErrorsAndExitCodes(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := f.run(t, "fault", "nope")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, `otelcol-gpu-ctl: fault "nope" is unknown to the console`)
	assert.Contains(t, errOut, "(HTTP 404)")

	for _, args := range [][]string{
		{}, {"frobnicate"}, {"fault"}, {"faults", "extra"}, {"release", "node-3"}, {"breaker", "reset"},
		{"breaker", "open"}, {"nodes", "--all"}, {"heatmap"}, {"--nope", "faults"}, {"heatmap", "llama", "--attempt", "x"},
	} {
		code, _, errOut := f.run(t, args...)
		assert.Equal(t, 2, code, "%q", args)
		assert.Contains(t, errOut, "usage: otelcol-gpu-ctl", "%q", args)
	}
	code, _, errOut = f.run(t, "release", "node-3")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "release node-3 needs --reason")
	assert.Empty(t, f.ctrl.Calls(), "usage errors reach nothing")

	// No token: neither --token-file nor the environment.
	var o, e bytes.Buffer
	code = run([]string{"faults"}, &o, &e)
	assert.Equal(t, 2, code)
	assert.Contains(t, e.String(), "no API token: pass --token-file FILE or set OTELCOL_GPU_CONSOLE_TOKEN")
	// The token from the environment.
	t.Setenv(envToken, token)
	o.Reset()
	e.Reset()
	require.Equal(t, 0, run([]string{"nodes"}, &o, &e), e.String())
	assert.Contains(t, o.String(), "node-3")
	// A wrong token: the API's 401.
	t.Setenv(envToken, "wrong-token-wrong-token")
	e.Reset()
	assert.Equal(t, 1, run([]string{"nodes"}, &o, &e))
	assert.Contains(t, e.String(), "missing or wrong bearer token: send Authorization: Bearer <the token in the console's token_file> (HTTP 401)")
	// An unreachable server.
	e.Reset()
	assert.Equal(t, 1, run([]string{"--server", "http://127.0.0.1:1", "nodes"}, &o, &e))
	assert.Contains(t, e.String(), "calling the console at http://127.0.0.1:1")
	e.Reset()
	assert.Equal(t, 1, run([]string{"--server", "localhost:8787", "nodes"}, &o, &e))
	assert.Contains(t, e.String(), `console URL "localhost:8787" must be http://host:port`)
	// No controller: 503.
	f.console.Detach(f.ctrl)
	code, _, errOut = f.run(t, "breaker")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no remediation exporter is attached to the console")
}

func TestChangesReachTheController(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := f.run(t, "--operator", "alice", "ack", "f-xid-79", "--reason", "known bad GPU")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "acknowledged fault f-xid-79 as alice\n", out)
	code, out, errOut = f.run(t, "release", "node-3", "--reason", "GPU swapped")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "released node node-3: uncordoned node-3 and removed its taint\n", out)
	code, out, errOut = f.run(t, "breaker", "reset", "--reason", "fleet checked", "--operator", "bob")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "breaker reset by bob\nstate: closed\n")

	var got []string
	for _, c := range f.ctrl.Calls() {
		got = append(got, c.Method+" "+c.Target+" "+c.Operator.Name+" "+c.Operator.Reason)
	}
	assert.Equal(t, []string{
		"Acknowledge f-xid-79 alice known bad GPU",
		"Release node-3 tester GPU swapped", // $USER
		"ResetBreaker  bob fleet checked",
	}, got)
	code, out, _ = f.run(t, "faults")
	require.Equal(t, 0, code)
	assert.Regexp(t, `acted\s+cordon,taint\s+alice\s+f-xid-79`, out)

	code, _, errOut = f.run(t, "release", "node-3", "--reason", "again")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `node "node-3" is not quarantined by the remediation exporter (HTTP 404)`)
	f.ctrl.SetErr(errors.New("audit: disk full"))
	code, _, errOut = f.run(t, "breaker", "reset", "--reason", "x")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "resetting the breaker: audit: disk full (HTTP 502)")
}

func TestNodesBreakerJobsStatus(t *testing.T) {
	f := newFixture(t)
	code, out, _ := f.run(t, "nodes")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^node-3\s+2026-03-01 10:00:00Z\s+f-xid-79\s+cordon,taint\s+false\s+P1 xid_79$`, out)
	code, out, _ = f.run(t, "breaker")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "state: tripped\nquarantines: 4 of 4 within 30m0s\n")
	assert.Regexp(t, `(?m)^2026-03-01 10:00:00Z\s+tripped\s+-\s+-$`, out)
	code, out, _ = f.run(t, "jobs")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^llama\s+2\s+16\s+1-10 \(10\)\s+5\(3\)\s+`, out)
	code, out, _ = f.run(t, "status")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "otelcol-gpu 9.9.9")
	assert.Regexp(t, `(?m)^faults\s+1 open, 1 resolved, 0 acknowledged$`, out)
}

func TestHeatmap(t *testing.T) {
	f := newFixture(t)
	code, out, errOut := f.run(t, "heatmap", "llama")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 1+16+1)
	assert.Equal(t, "job llama attempt 2: 16 ranks x 10 steps (steps 1-10)", lines[0])
	assert.Equal(t, "rank 0  ░░░░░░░░░░", lines[1])
	assert.Equal(t, "rank 5  ░░░░░░░◆◆◆  straggler node-1", lines[6])
	assert.Contains(t, lines[17], "◆ straggler verdict")

	code, out, _ = f.run(t, "heatmap", "llama", "--ascii", "--attempt", "2")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "\nrank 5  -------XXX  straggler node-1\n")
	code, _, errOut = f.run(t, "heatmap", "llama", "--attempt", "1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `job "llama" attempt 1 has no heatmap`)
}

func TestHeatmapShading(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	// The step's median is 100: ratios 1, 1, 1, 1.2, 1.4, 2, missing.
	h := consoleclient.Heatmap{Job: "j", Ranks: []int64{0, 1, 2, 3, 4, 5, 6}, Nodes: make([]string, 7), Steps: []int64{7},
		ComputeMS: [][]*float64{{v(100)}, {v(100)}, {v(100)}, {v(120)}, {v(140)}, {v(200)}, {nil}}}
	var b bytes.Buffer
	printHeatmap(&printer{w: &b, ascii: true}, h)
	assert.Equal(t, "job j attempt 0: 7 ranks x 1 steps (steps 7-7)\nrank 0 -\nrank 1 -\nrank 2 -\nrank 3 +\nrank 4 *\nrank 5 #\nrank 6 .\n"+
		"legend: compute / step median - <=1.05 + <=1.25 * <=1.5 # >1.5  . missing  X straggler verdict\n", b.String())
}
