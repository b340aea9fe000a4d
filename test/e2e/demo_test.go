//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemo runs `make demo`'s program (cmd/demo) in a short configuration:
// 16 ranks on 2 nodes, 24 steps of 1 s. With 2 nodes the scenario's NVLink
// fault lands on node 0 GPU 6 and the straggler on node 1 GPU 3 (nodes are
// renumbered n mod 2). The demo must print both faults as the gateway
// reported them on gpu_faults, at least one dry-run remediation decision,
// and leave its outputs where its summary says. The step records go through
// the Python module (sdk/python/otelcol_gpu_step.py replay, one process per
// node): every record handed over is sent, none dropped. The gateway's
// repair loop is on (dry run, cmd/demo/gateway-repair.yaml): the NVLink
// fault's node goes onset → … → released, in the audit file, and the
// summary prints its steps, its time to recovery and the gateway's
// otelcol_remediation_time_to_recovery_seconds, which agree. The demo holds
// its processes up after the run (-hold) while the fault console it serves
// is driven in Chromium and with otelcol-gpu-ctl (checkDemoConsole), then
// ends on SIGINT.
func TestDemo(t *testing.T) {
	root := repoRoot(t)
	binary(t, "otelcol-gpu-agent")
	binary(t, "otelcol-gpu-gateway")
	broker := buildBroker(t)
	demo := filepath.Join(t.TempDir(), "demo")
	build := exec.Command("go", "build", "-o", demo, "./cmd/demo")
	build.Dir = root
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/demo: %v\n%s", err, msg)
	}

	ctl := filepath.Join(t.TempDir(), "otelcol-gpu-ctl")
	build = exec.Command("go", "build", "-o", ctl, "./cmd/otelcol-gpu-ctl")
	build.Dir = root
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/otelcol-gpu-ctl: %v\n%s", err, msg)
	}

	out := t.TempDir()
	consoleAddr := freeAddr(t)
	cmd := exec.Command(demo, "-out", out, "-nodes", "2", "-steps", "24", "-step", "1s", "-grace", "40s",
		"-broker", broker, "-console", consoleAddr, "-hold")
	cmd.Dir = root // the default -bin and configurations are relative to the repository
	var output lockedBuffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }()
	// A failure below must not leave the holding demo and its collectors
	// running: it stops them on SIGINT.
	t.Cleanup(func() {
		select {
		case <-done:
			return
		default:
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	held := false
	for !held {
		select {
		case <-done:
			t.Fatalf("the demo ended before holding (%v):\n%s", waitErr, output.String())
		case <-time.After(200 * time.Millisecond):
			held = strings.Contains(output.String(), "holding:")
		}
	}
	checkDemoConsole(t, ctl, out, "http://"+consoleAddr)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case <-done:
		err = waitErr
	case <-time.After(2 * time.Minute): // against a hang only
		_ = cmd.Process.Kill()
		<-done
		err = fmt.Errorf("did not end within 2 minutes of SIGINT: %v", waitErr)
	}
	text := output.String()
	t.Logf("demo output:\n%s", text)
	if err != nil {
		t.Fatalf("demo failed: %v", err)
	}

	// One line per record: the fault type, then where it is.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`FAULT open +straggler\.compute .* node=demo-n1 gpu=3 rank=11 `),
		regexp.MustCompile(`FAULT open +nvlink\.degraded .* node=demo-n0 gpu=6 rank=6 `),
		regexp.MustCompile(`REMEDIATION dry-run +quarantine \[[a-z,_]+\] +node=demo-n[01] `),
	} {
		if !want.MatchString(text) {
			t.Errorf("the output has no line matching %q", want)
		}
	}
	if !strings.Contains(text, "OK: every injected fault was detected") {
		t.Errorf("the summary does not report both faults found")
	}
	checkDemoRecovery(t, text, out)
	python := regexp.MustCompile(`step records: (\d+) sent through the Python module \(otelcol_gpu_step\), (\d+) dropped \((\d+) handed to 2 replay processes\)`)
	if m := python.FindStringSubmatch(text); m == nil {
		t.Errorf("the output has no line matching %q", python)
	} else {
		sent, _ := strconv.Atoi(m[1])
		dropped, _ := strconv.Atoi(m[2])
		handed, _ := strconv.Atoi(m[3])
		// 24 steps x 16 ranks
		if sent != 24*16 || handed != sent || dropped != 0 {
			t.Errorf("the Python module sent %d of %d step records and dropped %d; want all sent, none dropped", sent, handed, dropped)
		}
	}

	// The outputs the summary names.
	types := map[string]bool{}
	for _, rec := range jsonLines(t, filepath.Join(out, "faults.jsonl")) {
		types[rec["fault.type"].(string)] = true
	}
	for _, typ := range []string{"straggler.compute", "nvlink.degraded"} {
		if !types[typ] {
			t.Errorf("faults.jsonl has no %s record (types: %v)", typ, types)
		}
	}
	dryRun := 0
	for _, e := range jsonLines(t, filepath.Join(out, "remediation-audit.jsonl")) {
		if e["decision"] == "dry_run" {
			dryRun++
		}
	}
	if dryRun == 0 {
		t.Errorf("the audit file has no dry_run decision")
	}
	for _, log := range []string{"kfakebroker", "gateway", "agent-demo-n0", "agent-demo-n1", "python-demo-n0", "python-demo-n1"} {
		if _, err := os.Stat(filepath.Join(out, "logs", log+".log")); err != nil {
			t.Errorf("log of %s: %v", log, err)
		}
	}
}

// jsonLines reads a file of one JSON object a line.
func jsonLines(t *testing.T, path string) []map[string]any {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// checkDemoConsole checks the fault console of a demo holding after its
// run: in Chromium (driveConsole) the demo's two faults are listed and the
// heatmap marks the straggler's and the NVLink rank's verdicts
// (screenshots into $CONSOLE_SCREENSHOT_DIR: make console-screenshots
// writes docs/images/); with otelcol-gpu-ctl, an acknowledgement and a
// release and a breaker reset reach the remediation exporter's audit file
// (as dry runs where they would act) with the operator and reason, and a
// request without the token or with another is refused.
func checkDemoConsole(t *testing.T, ctl, out, baseURL string) {
	tokenFile := filepath.Join(out, "console-token")
	token, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	ids := map[string]string{} // fault type -> id
	var job string
	for _, rec := range jsonLines(t, filepath.Join(out, "faults.jsonl")) {
		if rec["fault.state"] == "open" {
			ids[rec["fault.type"].(string)] = rec["fault.id"].(string)
			job, _ = rec["training.job.id"].(string)
		}
	}
	require.Contains(t, ids, "straggler.compute")
	require.Contains(t, ids, "nvlink.degraded")

	screenshots := os.Getenv("CONSOLE_SCREENSHOT_DIR")
	if screenshots == "" {
		screenshots = t.TempDir()
	}
	driveConsole(t, baseURL, strings.TrimSpace(string(token)), screenshots, consoleExpectations{
		FaultIDs: []string{ids["straggler.compute"], ids["nvlink.degraded"]},
		Job:      job, Ranks: 16, StragglerRanks: []int64{6, 11},
		Operator: "e2e-operator",
	})

	run := func(wantCode int, args ...string) string {
		t.Helper()
		cmd := exec.Command(ctl, append([]string{"--server", baseURL, "--token-file", tokenFile, "--operator", "e2e-operator"}, args...)...)
		cmd.Env = append(os.Environ(), "OTELCOL_GPU_CONSOLE_TOKEN=")
		outb, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, wantCode, code, "otelcol-gpu-ctl %v:\n%s", args, outb)
		return string(outb)
	}
	faults := run(0, "faults")
	for _, id := range ids {
		assert.Contains(t, faults, id)
	}
	assert.Regexp(t, `nvlink\.degraded +demo-n0 .* dry_run `, faults, "the NVLink fault shows remediation's dry-run quarantine")
	assert.Contains(t, run(0, "heatmap", job), "straggler demo-n1")
	run(0, "ack", ids["nvlink.degraded"], "--reason", "RMA ticket 42")
	run(0, "release", "demo-n1", "--reason", "reseated the GPU")
	run(0, "breaker", "reset", "--reason", "after the drill")
	noToken := exec.Command(ctl, "--server", baseURL, "faults")
	noToken.Env = append(os.Environ(), "OTELCOL_GPU_CONSOLE_TOKEN=")
	msg, err := noToken.CombinedOutput()
	assert.Error(t, err, "otelcol-gpu-ctl without a token: %s", msg)
	bad := exec.Command(ctl, "--server", baseURL, "faults")
	bad.Env = append(os.Environ(), "OTELCOL_GPU_CONSOLE_TOKEN=not-the-token-0123456789")
	msg, err = bad.CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(msg), "401")

	// The audit file holds both changes with who asked and why.
	var acked, released, reset bool
	for _, e := range jsonLines(t, filepath.Join(out, "remediation-audit.jsonl")) {
		if e["operator"] != "e2e-operator" {
			continue
		}
		switch {
		case e["step"] == "acknowledge" && e["fault.id"] == ids["nvlink.degraded"] && e["operator.reason"] == "RMA ticket 42":
			acked = true
		case e["step"] == "release" && e["node"] == "demo-n1" && e["decision"] == "dry_run" && e["operator.reason"] == "reseated the GPU":
			released = true
		case e["step"] == "breaker" && e["event"] == "reset" && e["decision"] == "dry_run" && e["operator.reason"] == "after the drill":
			reset = true
		}
	}
	assert.True(t, acked, "the audit file has the acknowledgement with its operator and reason")
	assert.True(t, released, "the audit file has the (dry-run) release with its operator and reason")
	assert.True(t, reset, "the audit file has the (dry-run) breaker reset with its operator and reason")
}

// checkDemoRecovery checks the repair loop of the demo's run: the NVLink
// fault's node demo-n0 went through every step in the audit file (dry
// run) and was released; the summary prints its steps from the onset, its
// time to recovery, and the gateway's time-to-recovery histogram (kept in
// gateway-metrics.prom) with one observation, agreeing with the audit.
func checkDemoRecovery(t *testing.T, text, out string) {
	t.Helper()
	var steps []string
	var onset, released time.Time
	for _, e := range jsonLines(t, filepath.Join(out, "remediation-audit.jsonl")) {
		if e["step"] != "repair" || e["node"] != "demo-n0" || e["decision"] != "dry_run" {
			continue
		}
		assert.Equal(t, "nvlink.degraded", e["fault.type"])
		step, _ := e["lifecycle.step"].(string)
		steps = append(steps, step)
		at, err := time.Parse(time.RFC3339Nano, e["time"].(string))
		require.NoError(t, err)
		switch step {
		case "onset":
			onset = at
		case "released":
			released = at
		}
	}
	assert.Equal(t, []string{"onset", "recorded", "quarantined", "drained", "repairing", "repaired", "verifying", "verified", "released"},
		steps, "demo-n0's repair loop in the audit file")

	section := regexp.MustCompile(`(?s)repair loop \(remediation exporter, repair\.enabled\):\n(.*?)\n[^ ]`).FindStringSubmatch(text)
	require.NotNil(t, section, "the summary has no repair loop section")
	assert.Regexp(t, `  node demo-n0  fault nvlink\.degraded [0-9a-f]+  \(dry run: nothing called, each step as if done\)\n`, section[1])
	for _, step := range steps {
		assert.Regexp(t, `\n    `+step+` +\+\d+\.\ds  gpu_reset attempt 1\n`, section[1], "the summary's step %s", step)
	}
	ttr := regexp.MustCompile(`  time to recovery demo-n0: (\d+\.\d)s onset → released \(dry run\)\n`).FindStringSubmatch(section[1])
	require.NotNil(t, ttr, "the summary has no time to recovery of demo-n0:\n%s", section[1])
	if !onset.IsZero() && !released.IsZero() {
		assert.Equal(t, fmt.Sprintf("%.1f", released.Sub(onset).Seconds()), ttr[1], "the audit's onset → released")
	}
	metrics := regexp.MustCompile(`  gateway otelcol_remediation_time_to_recovery_seconds: count 1, sum (\d+\.\d)s, mean (\d+\.\d)s, median in bucket \(\S+, \S+\]\n`).FindStringSubmatch(section[1])
	require.NotNil(t, metrics, "the summary has no time-to-recovery histogram with one observation:\n%s", section[1])
	sum, _ := strconv.ParseFloat(metrics[1], 64)
	fromAudit, _ := strconv.ParseFloat(ttr[1], 64)
	// both rounded to 0.1 s from values a few milliseconds apart
	assert.InDelta(t, fromAudit, sum, 0.1001, "the histogram's sum is demo-n0's time to recovery")
	assert.Contains(t, section[1], "time in each step (otelcol_remediation_lifecycle_step_seconds, sum (count)): onset ")
	assert.Contains(t, section[1], "  the audit file and the gateway's metrics agree")
	assert.NotContains(t, section[1], "MISMATCH")
	page, err := os.ReadFile(filepath.Join(out, "gateway-metrics.prom"))
	require.NoError(t, err, "the gateway's telemetry page kept in the output directory")
	assert.Contains(t, string(page), "otelcol_remediation_time_to_recovery_seconds_count 1\n")
}
