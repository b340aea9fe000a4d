//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// maxPickleBytes is the parser's cap on a pickle dump (frdump.Options
// MaxBytes): the "maximum-size" dump is just under it.
const maxPickleBytes = 8 << 20

// stepspanKeptPerRank is the stepspan processor's max_collectives_per_rank
// (default 4096, not set in the agent config): of a rank's collectives no
// step claims, it keeps and later forwards the newest 4096 and drops the
// older ones (counted in otelcol_processor_stepspan_collectives_dropped,
// logged once per rank), so a 20,000-entry dump, read
// whole by the receiver, reaches otlp_spans as its last 4096 spans.
const stepspanKeptPerRank = 4096

// stepspanMaxCollectives is the stepspan processor's max_collectives
// (default 16384, not set in the agent config): all ranks together keep at
// most this many, each rank its share.
const stepspanMaxCollectives = 16384

// agentRuntime is what deploy/kubernetes/rendered/agent-daemonset.yaml (the
// Helm chart's default agent DaemonSet) gives
// the agent container: its memory limit and the Go runtime's settings.
type agentRuntime struct {
	memoryLimit int64  // resources.limits.memory, bytes
	goMemLimit  string // env GOMEMLIMIT, as the runtime reads it
	goMaxProcs  int    // env GOMAXPROCS: requests.cpu rounded up
}

// A dump dropped into the agent's flight recorder directory cannot take
// the agent past its DaemonSet memory limit (issue 19): the real agent
// binary, with the shipped config and the DaemonSet's Go runtime settings
// (GOMEMLIMIT, GOMAXPROCS), reads torch's default 2,000-entry dump and the
// largest dump it admits (20,000 entries), and refuses the memo
// bomb and a 7.9 MiB pickle just under the size cap, each counted as
// over_budget and logged with its file name; each dump alone in a fresh
// agent, then all four at once. The peak RSS (VmHWM, reset before the
// dumps) stays under the container's limit, the agent stays up, the read
// dumps' spans reach otlp_spans and the ib receiver's metrics keep
// reaching otlp_metrics. The log prints the peaks (BENCHMARKS.md).
func TestDumpMemory(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	brokerBin := buildBroker(t)
	rt := daemonSetAgentRuntime(t, filepath.Join(root, "deploy", "kubernetes", "rendered", "agent-daemonset.yaml"))
	t.Logf("DaemonSet: memory limit %d MiB, GOMEMLIMIT=%s, GOMAXPROCS=%d", rt.memoryLimit>>20, rt.goMemLimit, rt.goMaxProcs)

	brokerAddr := freeAddr(t)
	ready := filepath.Join(t.TempDir(), "ready")
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr, "-ready-file", ready,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	eventually(t, 30*time.Second, "broker ready", func() error {
		_, err := os.Stat(ready)
		return err
	}, broker)

	gen := buildFRDumpGen(t)
	synthetic := func(entries int) []byte {
		return genDump(t, gen, "-entries", strconv.Itoa(entries))
	}
	bomb := genDump(t, gen, "-memo-bomb", "-entries", "1000", "-items", strconv.Itoa(1<<20-1))
	dumps := []memDump{
		{name: "2,000 entries x 16 frames (torch's default ring buffer)", data: synthetic(2000), read: true, entries: 2000},
		{name: "20,000 x 16 (MaxEntries: the largest dump read)", data: synthetic(20000), read: true, entries: 20000},
		{name: "45,000 x 16, just under the 8 MiB pickle cap", data: synthetic(45000)},
		{name: "issue 19's memo bomb (1,000 entries sharing one 1,048,575-item list)", data: bomb},
	}
	if n := len(dumps[2].data); n >= maxPickleBytes || n < maxPickleBytes*9/10 {
		t.Fatalf("the max-size dump is %d bytes, want just under %d", n, maxPickleBytes)
	}

	// Each dump alone in an agent of its own (its peak is the dump's, not
	// what an earlier one left in the heap), then all four at once.
	// Every dump file has a rank of its own: its spans are told apart in
	// otlp_spans, which all lives share.
	life := func(first bool, rank int, batch []memDump) []string {
		frDir := t.TempDir()
		addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
		node := testbed.NodeInputs{Host: "dumpmem-n0", JobID: "dumpmem-job", PageURL: "http://" + freeAddr(t) + "/metrics",
			SysfsRoot: filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), FRDir: frDir}
		env, err := node.AgentEnv(brokerAddr, t.TempDir(), addrs, true)
		if err != nil {
			t.Fatal(err)
		}
		// The DaemonSet's Go runtime settings; it sets no GOGC (an empty
		// one is the runtime's default, 100, whatever this process has).
		env = append(env, "GOMEMLIMIT="+rt.goMemLimit, "GOMAXPROCS="+strconv.Itoa(rt.goMaxProcs), "GOGC=")
		agent := startProcess(t, "agent", env, agentBin,
			"--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
		defer agent.stop(t)
		waitHTTP(t, "http://"+addrs.Health+"/", agent)
		telemetry := "http://" + addrs.Telemetry + "/metrics"
		pid := agent.Pid()
		ibSent := func() (ib, sent float64) {
			return telemetrySum(t, telemetry, "otelcol_receiver_accepted_metric_points", `receiver="ib"`),
				telemetrySum(t, telemetry, "otelcol_exporter_sent_metric_points", `exporter="kafka"`)
		}

		// Another receiver produces before the dumps: ib's points reach
		// otlp_metrics (the fixture's counter itself, the first time).
		if first {
			eventually(t, 90*time.Second, "the ib fixture's counter in otlp_metrics", func() error {
				return xmitValueInKafka(t, brokerAddr, int64(fixtureXmitWords*4))
			}, agent, broker)
		}
		eventually(t, 90*time.Second, "ib points sent to otlp_metrics", func() error {
			if ib, sent := ibSent(); ib == 0 || sent == 0 {
				return fmt.Errorf("ib accepted %v points, kafka sent %v", ib, sent)
			}
			return nil
		}, agent, broker)

		resetPeakRSS(t, pid)
		startRSS := procStatus(t, pid, "VmRSS")
		var sampledPeak int64
		sample := func() {
			if v := procStatus(t, pid, "VmRSS"); v > sampledPeak {
				sampledPeak = v
			}
		}
		// Written under a name no pattern matches, then renamed into
		// place, as torch's dump writer does.
		names := make([]string, len(batch))
		for i, d := range batch {
			names[i] = filepath.Join(frDir, "nccl_trace_rank_"+strconv.Itoa(rank+i))
			if err := os.WriteFile(names[i]+".tmp-write", d.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range names {
			if err := os.Rename(name+".tmp-write", name); err != nil {
				t.Fatal(err)
			}
		}

		what := batch[0].name
		if len(batch) > 1 {
			what = "all four dumps at once"
		}
		var wantRead, wantRefused int
		for _, d := range batch {
			if d.read {
				wantRead++
			} else {
				wantRefused++
			}
		}
		eventually(t, 3*time.Minute, what+": read or refused as over_budget", func() error {
			sample()
			read := telemetryCounter(t, telemetry, "otelcol_ncclflight_dumps_read")
			refused := telemetrySum(t, telemetry, "otelcol_ncclflight_bad_inputs", `input="flight_recorder"`, `reason="over_budget"`)
			if read != float64(wantRead) || refused != float64(wantRefused) {
				return fmt.Errorf("dumps_read %v, bad_inputs{reason=\"over_budget\"} %v; want %d and %d", read, refused, wantRead, wantRefused)
			}
			return nil
		}, agent)
		for i, d := range batch {
			if d.read {
				// The read dump's spans reach otlp_spans.
				eventually(t, 3*time.Minute, d.name+": its spans in otlp_spans", func() error {
					sample()
					if n, want := spansByRank(t, brokerAddr)[rank+i], min(d.entries, stepspanKeptPerRank); n != want {
						return fmt.Errorf("%d spans of rank %d in otlp_spans, want %d", n, rank+i, want)
					}
					return nil
				}, agent, broker)
				continue
			}
			// The refused one is named, with the reason, in a WARN line.
			eventually(t, 30*time.Second, d.name+": a log line names the file and over_budget", func() error {
				if agent.LogCount(names[i]+" (over_budget)") == 0 {
					return fmt.Errorf("no line with %q in the agent's log", names[i]+" (over_budget)")
				}
				return nil
			}, agent)
		}
		sample()
		peak := procStatus(t, pid, "VmHWM")
		if agent.exited() {
			t.Fatalf("%s: the agent exited (%v)", what, agent.Err())
		}
		if peak >= rt.memoryLimit {
			t.Errorf("%s: peak RSS %.1f MiB, at or over the DaemonSet's limit %d MiB", what, mib(peak), rt.memoryLimit>>20)
		}

		// The ib receiver keeps producing, and its points keep reaching
		// Kafka, after the dumps.
		ibBefore, sentBefore := ibSent()
		eventually(t, 60*time.Second, what+": the ib receiver keeps producing into otlp_metrics", func() error {
			if ib, sent := ibSent(); ib <= ibBefore || sent <= sentBefore {
				return fmt.Errorf("ib accepted %v points (%v after the dumps), kafka sent %v (%v)", ib, ibBefore, sent, sentBefore)
			}
			return nil
		}, agent, broker)

		var size int
		result := map[bool]string{true: "read", false: "refused, over_budget"}[batch[0].read]
		for _, d := range batch {
			size += len(d.data)
		}
		if len(batch) > 1 {
			result = fmt.Sprintf("%d read, %d refused", wantRead, wantRefused)
		}
		line := fmt.Sprintf("| %s | %.2f MiB | %s | %.1f MiB | %.1f MiB | %.1f MiB |", what, mib(int64(size)), result,
			mib(startRSS), mib(sampledPeak), mib(peak))
		t.Log(line)
		return []string{line}
	}

	var report []string
	for i, d := range dumps {
		report = append(report, life(i == 0, i, []memDump{d})...)
	}
	report = append(report, life(false, len(dumps), dumps)...)
	t.Logf("peak RSS of a fresh agent per dump (VmHWM reset once ib's points flow, before the dump; GOMEMLIMIT=%s, GOMAXPROCS=%d, limit %d MiB):\n| dump | size | result | RSS before | VmRSS peak sampled | VmHWM |\n%s",
		rt.goMemLimit, rt.goMaxProcs, rt.memoryLimit>>20, strings.Join(report, "\n"))
}

// memDump is one dump TestDumpMemory drops: read (its spans reach
// otlp_spans) or refused as over_budget.
type memDump struct {
	name    string
	data    []byte
	read    bool
	entries int
}

// buildFRDumpGen compiles the dump generator: the receiver's dump writers
// are internal to it.
func buildFRDumpGen(t *testing.T) string {
	out := filepath.Join(repoRoot(t), "_build", "frdumpgen")
	cmd := exec.Command("go", "build", "-o", out, "./receiver/ncclflightreceiver/internal/frdump/frdumptest/frdumpgen")
	cmd.Dir = repoRoot(t)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building frdumpgen: %v\n%s", err, msg)
	}
	return out
}

// genDump runs frdumpgen with args and returns the dump it wrote.
func genDump(t *testing.T, gen string, args ...string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dump")
	if msg, err := exec.Command(gen, append([]string{"-out", out}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("frdumpgen %v: %v\n%s", args, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// daemonSetAgentRuntime reads the agent container's memory limit,
// GOMEMLIMIT and GOMAXPROCS (requests.cpu rounded up, as its
// resourceFieldRef with divisor 1 gives it) from the DaemonSet manifest.
func daemonSetAgentRuntime(t *testing.T, path string) agentRuntime {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string `yaml:"name"`
						Env  []struct {
							Name  string `yaml:"name"`
							Value string `yaml:"value"`
						} `yaml:"env"`
						Resources struct {
							Requests map[string]string `yaml:"requests"`
							Limits   map[string]string `yaml:"limits"`
						} `yaml:"resources"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &ds); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "agent" {
			continue
		}
		var rt agentRuntime
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				rt.goMemLimit = e.Value
			}
		}
		if rt.goMemLimit == "" {
			t.Fatalf("%s: container agent sets no GOMEMLIMIT", path)
		}
		rt.memoryLimit = quantityBytes(t, path+": limits.memory", c.Resources.Limits["memory"])
		cpu := c.Resources.Requests["cpu"]
		milli, err := strconv.ParseFloat(strings.TrimSuffix(cpu, "m"), 64)
		if err != nil || cpu == "" {
			t.Fatalf("%s: requests.cpu %q: %v", path, cpu, err)
		}
		if !strings.HasSuffix(cpu, "m") {
			milli *= 1000
		}
		rt.goMaxProcs = int(math.Ceil(milli / 1000))
		return rt
	}
	t.Fatalf("%s: no container named agent", path)
	return agentRuntime{}
}

// quantityBytes reads a Kubernetes memory quantity with a binary suffix
// (Ki, Mi, Gi) or none.
func quantityBytes(t *testing.T, what, q string) int64 {
	t.Helper()
	shift := 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if strings.HasSuffix(q, u.suffix) {
			q, shift = strings.TrimSuffix(q, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(q, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("%s %q: want a positive number of bytes, Ki, Mi or Gi", what, q)
	}
	return n << shift
}

// procStatus returns a size field of /proc/<pid>/status (VmRSS, VmHWM) in
// bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %v", pid, line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// resetPeakRSS sets VmHWM back to the current RSS (clear_refs 5, Linux >=
// 4.0), so that the next VmHWM is the peak of what follows.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the agent's VmHWM: %v", err)
	}
}

// telemetryCounter is the value of an unlabelled metric on a collector's
// Prometheus endpoint (telemetrySum matches labelled series only); 0 when
// it has not been recorded yet.
func telemetryCounter(t *testing.T, url, metric string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `(?:_total)?(?:\{[^}]*\})? (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s: %v", m[0], err)
	}
	return v
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
