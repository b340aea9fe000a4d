//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDemo runs `make demo`'s program (cmd/demo) in a short configuration:
// 16 ranks on 2 nodes, 24 steps of 1 s. With 2 nodes the scenario's NVLink
// fault lands on node 0 GPU 6 and the straggler on node 1 GPU 3 (nodes are
// renumbered n mod 2). The demo must print both faults as the gateway
// reported them on gpu_faults, at least one dry-run remediation decision,
// and leave its outputs where its summary says. The step records go through
// the Python module (sdk/python/otelcol_gpu_step.py replay, one process per
// node): every record handed over is sent, none dropped.
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

	out := t.TempDir()
	cmd := exec.Command(demo, "-out", out, "-nodes", "2", "-steps", "24", "-step", "1s", "-grace", "40s",
		"-broker", broker)
	cmd.Dir = root // the default -bin and configurations are relative to the repository
	output, err := cmd.CombinedOutput()
	text := string(output)
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
