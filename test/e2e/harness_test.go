//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/test/childproc"
	"github.com/otelcol-gpu/otelcol-gpu/test/freeport"
)

// repoRoot is two levels up from test/e2e.
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// binary returns a collector binary built by `make build`.
func binary(t *testing.T, name string) string {
	path := filepath.Join(repoRoot(t), "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not built (run `make build` first): %v", path, err)
	}
	return path
}

// lookPath fails the test when a program the test needs is not installed:
// the end-to-end test never skips itself.
func lookPath(t *testing.T, name string) string {
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (make e2e-deps installs it): %v", name, err)
	}
	return path
}

// freeAddr returns a loopback address with a port nobody listens on now,
// outside the ports outgoing connections take (freeport).
func freeAddr(t *testing.T) string {
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// process is a child program whose output goes to a log file, shown when
// the test fails.
type process struct {
	*childproc.Process
}

// stopGrace is how long a child has to exit on SIGTERM before its process
// group is killed.
const stopGrace = 15 * time.Second

func startProcess(t *testing.T, name string, env []string, bin string, args ...string) *process {
	t.Helper()
	child, err := childproc.Start(childproc.Options{Name: name, LogDir: t.TempDir(), Env: env}, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{child}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			p.dumpLog(t, 60)
		}
	})
	return p
}

// startWithConfig writes cfg (a collector config) to a temporary file and
// starts the collector binary bin on it.
func startWithConfig(t *testing.T, name, bin, cfg string) *process {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startProcess(t, name, nil, bin, "--config", path)
}

func (p *process) stop(t *testing.T) {
	if p.Stop(stopGrace) {
		t.Logf("%s did not stop on SIGTERM; killing it", p.Name())
	}
}

func (p *process) exited() bool {
	exited, _ := p.Exited()
	return exited
}

func (p *process) dumpLog(t *testing.T, lines int) {
	tail, err := p.Tail(lines)
	if err != nil {
		t.Logf("%s log: %v", p.Name(), err)
		return
	}
	t.Logf("---- last %d lines of %s ----\n%s", strings.Count(tail, "\n")+1, p.Name(), tail)
}

// eventually polls cond until it returns nil or the wait runs out; the last
// error explains the failure. It bounds how long the test waits for a
// distributed system to converge; it measures no speed.
func eventually(t *testing.T, wait time.Duration, what string, cond func() error, watch ...*process) {
	t.Helper()
	deadline := time.Now().Add(wait)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		for _, p := range watch {
			if p.exited() {
				t.Fatalf("%s: %s exited (%v) while waiting", what, p.Name(), p.Err())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, wait, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func waitHTTP(t *testing.T, url string, p *process) {
	t.Helper()
	eventually(t, 60*time.Second, "waiting for "+p.Name()+" at "+url, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}, p)
}

// prometheus is a real Prometheus server (Debian's package) with its
// remote-write receiver on.
type prometheus struct {
	addr string
	proc *process
}

func startPrometheus(t *testing.T) *prometheus {
	bin := lookPath(t, "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	// No scrape jobs: everything arrives through remote write.
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 15s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProcess(t, "prometheus", nil, bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--web.enable-remote-write-receiver",
	)
	waitHTTP(t, "http://"+addr+"/-/ready", p)
	return &prometheus{addr: addr, proc: p}
}

func (p *prometheus) writeURL() string { return "http://" + p.addr + "/api/v1/write" }

type promSample struct {
	Labels map[string]string
	Values [][2]any // [unix seconds float, "value string"]
}

// query runs an instant PromQL query; range selectors return raw samples.
func (p *prometheus) query(q string, at time.Time) ([]promSample, error) {
	v := url.Values{"query": {q}}
	if !at.IsZero() {
		v.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/v1/query?"+v.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("query %q: %w: %s", q, err, body)
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, out.Error)
	}
	var samples []promSample
	for _, r := range out.Data.Result {
		s := promSample{Labels: r.Metric, Values: r.Values}
		if r.Values == nil {
			s.Values = [][2]any{r.Value}
		}
		samples = append(samples, s)
	}
	return samples, nil
}

// scalar returns the value of a query that must select exactly one series.
func (p *prometheus) scalar(q string) (float64, map[string]string, error) {
	res, err := p.query(q, time.Time{})
	if err != nil {
		return 0, nil, err
	}
	if len(res) != 1 {
		return 0, nil, fmt.Errorf("query %q: %d series, want 1", q, len(res))
	}
	v, err := sampleValue(res[0].Values[len(res[0].Values)-1])
	return v, res[0].Labels, err
}

func sampleValue(s [2]any) (float64, error) {
	str, ok := s[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", s[1])
	}
	return strconv.ParseFloat(str, 64)
}

func sampleTime(s [2]any) time.Time {
	f, _ := s[0].(float64)
	return time.UnixMilli(int64(f * 1000))
}

// copyTree copies a directory of small files (a sysfs fixture).
func copyTree(t *testing.T, src, dst string) {
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeFileAtomic replaces a file the way a kernel value changes between two
// reads: a reader sees the old or the new value, never half of one.
func writeFileAtomic(t *testing.T, path, content string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

var buildOnce sync.Once

// buildBroker compiles the kfake wrapper (test/kfakebroker).
func buildBroker(t *testing.T) string {
	out := filepath.Join(repoRoot(t), "_build", "kfakebroker")
	var err error
	var msg []byte
	buildOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", out, "./test/kfakebroker")
		cmd.Dir = repoRoot(t)
		msg, err = cmd.CombinedOutput()
	})
	if err != nil {
		t.Fatalf("building kfakebroker: %v\n%s", err, msg)
	}
	return out
}

func netSplit(addr string) (string, string, error) { return net.SplitHostPort(addr) }

func netDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }
