package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/test/childproc"
)

// IBOptions configure the side-by-side run of the ib receiver and node_exporter's
// infiniband collector on one RoCE sysfs tree (issue 32): both produce the
// tree's data every Interval for Duration, and each one's CPU per scrape
// is its CPU over that window less its own idle CPU.
type IBOptions struct {
	Agent        string // bin/otelcol-gpu-agent
	AgentConfig  string // distributions/agent/config.yaml: its receivers.ib block is used as shipped
	NodeExporter string // .tools/bin/node_exporter (v1.12.1)
	// Fixture is the device directory copied Devices times (mlx5_0 ...),
	// each port's link_layer rewritten to Ethernet (RoCE).
	Fixture  string
	Devices  int
	Interval time.Duration // the agent's collection_interval and node_exporter's scrape period
	Duration time.Duration // measured window of each process
	Warmup   time.Duration
	Rounds   int
	// NodeExporterSelfMetrics keeps node_exporter's go_*, process_* and
	// promhttp_* series on its page (without --web.disable-exporter-metrics).
	NodeExporterSelfMetrics bool
	// Runtime is the agent's Go runtime settings (the DaemonSet's).
	// node_exporter runs with its own default, GOMAXPROCS=1
	// (--runtime.gomaxprocs).
	Runtime  GoRuntime
	Dir      string
	Progress io.Writer
}

// IBSide is one process's measurement in one round.
type IBSide struct {
	CPU, IdleCPU time.Duration // over the loaded and idle windows
	Wall, Idle   time.Duration // the windows
	// Scrapes is the scrapes in the loaded window; the agent's in whole
	// scrapes' worth of metrics: a scrape that left a device out (its
	// reads past read_timeout, here the interval) counts for its part.
	Scrapes float64
}

// PerScrape is the CPU of one scrape: the loaded window's CPU less the
// idle rate over it, divided by the scrapes.
func (s IBSide) PerScrape() time.Duration {
	if s.Scrapes == 0 || s.Idle <= 0 {
		return 0
	}
	idle := time.Duration(float64(s.IdleCPU) * s.Wall.Seconds() / s.Idle.Seconds())
	return time.Duration(float64(s.CPU-idle) / s.Scrapes)
}

// IBRound is one side-by-side comparison.
type IBRound struct{ NodeExporter, Agent IBSide }

// Ratio is the agent's CPU per scrape over node_exporter's.
func (r IBRound) Ratio() float64 {
	return ratio(r.Agent.PerScrape().Seconds(), r.NodeExporter.PerScrape().Seconds())
}

// IBComparison is the result of RunIB.
type IBComparison struct {
	Options IBOptions
	Rounds  []IBRound
	Metrics int64 // metrics of one agent scrape (what otelcol_scraper_scraped_metric_points counts)
	Series  int   // node_infiniband_ samples on node_exporter's page
}

// BuildRoCETree copies the device directory fixture n times into
// root/class/infiniband/mlx5_<i>, with link_layer Ethernet on every port.
func BuildRoCETree(fixture, root string, n int) error {
	for i := range n {
		dev := filepath.Join(root, "class", "infiniband", fmt.Sprintf("mlx5_%d", i))
		if err := os.CopyFS(dev, os.DirFS(fixture)); err != nil {
			return fmt.Errorf("loadtest: %w", err)
		}
		ports, err := os.ReadDir(filepath.Join(dev, "ports"))
		if err != nil {
			return fmt.Errorf("loadtest: %w", err)
		}
		for _, p := range ports {
			if err := os.WriteFile(filepath.Join(dev, "ports", p.Name(), "link_layer"), []byte("Ethernet\n"), 0o644); err != nil {
				return fmt.Errorf("loadtest: %w", err)
			}
		}
	}
	return nil
}

// RunIB builds the tree and runs Rounds comparisons. In each round,
// node_exporter (--collector.disable-defaults --collector.infiniband
// --web.disable-exporter-metrics: its page is the infiniband collector's
// alone, unless NodeExporterSelfMetrics) is scraped over HTTP every Interval for Duration, after an idle
// window of Duration without scrapes; then the agent runs with only the
// ib receiver (the shipped config's block, collection_interval Interval)
// and a debug exporter at basic verbosity whose logs are off, and again
// with collection_interval 1h (one scrape, after initial_delay: its idle
// cost). The agent's scrapes are counted from its own telemetry
// (otelcol_scraper_scraped_metric_points, which counts metrics, over
// those of one scrape).
// CPU is the sum over the process's threads of the time they ran
// (/proc/<pid>/task/*/schedstat, nanoseconds).
func RunIB(ctx context.Context, opts IBOptions) (*IBComparison, error) {
	c := &IBComparison{Options: opts}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	tree := filepath.Join(opts.Dir, "sys")
	if err := BuildRoCETree(opts.Fixture, tree, opts.Devices); err != nil {
		return nil, err
	}
	ibBlock, err := shippedIBBlock(opts.AgentConfig)
	if err != nil {
		return nil, err
	}
	for round := range opts.Rounds {
		var r IBRound
		if r.NodeExporter, c.Series, err = runNodeExporterIB(ctx, opts, tree, round); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "round %d: node_exporter %v per scrape (%.0f scrapes)\n", round+1, r.NodeExporter.PerScrape(), r.NodeExporter.Scrapes)
		if r.Agent, c.Metrics, err = runAgentIB(ctx, opts, tree, ibBlock, round); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "round %d: agent %v per scrape (%.1f scrapes); ratio %.2f\n", round+1, r.Agent.PerScrape(), r.Agent.Scrapes, r.Ratio())
		c.Rounds = append(c.Rounds, r)
	}
	return c, nil
}

func runNodeExporterIB(ctx context.Context, opts IBOptions, tree string, round int) (IBSide, int, error) {
	var side IBSide
	addr, err := FreeAddr()
	if err != nil {
		return side, 0, err
	}
	args := []string{"--path.sysfs=" + tree, "--collector.disable-defaults", "--collector.infiniband", "--web.listen-address=" + addr}
	if !opts.NodeExporterSelfMetrics {
		args = append(args, "--web.disable-exporter-metrics")
	}
	ne, err := startProcess(opts.Dir, fmt.Sprintf("node_exporter-%d", round), nil, opts.NodeExporter, args...)
	if err != nil {
		return side, 0, err
	}
	defer ne.Stop(stopGrace)
	url := "http://" + addr + "/metrics"
	var page []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		if page, err = get(ctx, url); err == nil {
			break
		}
		if exited, _ := ne.Exited(); exited || time.Now().After(deadline) {
			return side, 0, fmt.Errorf("loadtest: node_exporter does not answer: %v\n%s", err, tail(ne, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	series := 0
	for _, line := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(line, "node_infiniband_") {
			series++
		}
	}
	if series == 0 {
		return side, 0, errors.New("loadtest: node_exporter's page has no node_infiniband_ series")
	}
	// Warm-up at the agent's pace, then the idle window, then the loaded one.
	if _, err := scrapeEvery(ctx, url, opts.Interval, opts.Warmup); err != nil {
		return side, 0, err
	}
	if side.IdleCPU, side.Idle, err = cpuOver(ctx, ne.Pid(), opts.Duration, nil); err != nil {
		return side, 0, err
	}
	side.CPU, side.Wall, err = cpuOver(ctx, ne.Pid(), opts.Duration, func(ctx context.Context) error {
		n, err := scrapeEvery(ctx, url, opts.Interval, opts.Duration)
		side.Scrapes = float64(n)
		return err
	})
	return side, series, err
}

// runAgentIB measures the agent scraping every Interval, then the idle
// agent (collection_interval 1h), whose one scrape gives the metrics per
// scrape.
func runAgentIB(ctx context.Context, opts IBOptions, tree string, ibBlock map[string]any, round int) (IBSide, int64, error) {
	var side IBSide
	idle, err := startIBAgent(opts, tree, ibBlock, fmt.Sprintf("agent-idle-%d", round), time.Hour)
	if err != nil {
		return side, 0, err
	}
	defer idle.p.Stop(stopGrace)
	var perScrape int64
	for perScrape == 0 {
		if perScrape, err = idle.scrapedPoints(ctx); err != nil {
			return side, 0, err
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return side, 0, err
		}
	}
	if err := sleep(ctx, opts.Warmup); err != nil {
		return side, 0, err
	}
	if side.IdleCPU, side.Idle, err = cpuOver(ctx, idle.p.Pid(), opts.Duration, nil); err != nil {
		return side, 0, err
	}
	if n, err := idle.scrapedPoints(ctx); err != nil || n != perScrape {
		return side, 0, fmt.Errorf("loadtest: the idle agent scraped again (%d metrics, one scrape is %d): %v", n, perScrape, err)
	}
	idle.p.Stop(stopGrace)

	busy, err := startIBAgent(opts, tree, ibBlock, fmt.Sprintf("agent-ib-%d", round), opts.Interval)
	if err != nil {
		return side, 0, err
	}
	defer busy.p.Stop(stopGrace)
	if err := sleep(ctx, opts.Warmup); err != nil {
		return side, 0, err
	}
	p0, err := busy.scrapedPoints(ctx)
	if err != nil {
		return side, 0, err
	}
	if side.CPU, side.Wall, err = cpuOver(ctx, busy.p.Pid(), opts.Duration, nil); err != nil {
		return side, 0, err
	}
	p1, err := busy.scrapedPoints(ctx)
	if err != nil {
		return side, 0, err
	}
	side.Scrapes = float64(p1-p0) / float64(perScrape)
	if exited, err := busy.p.Exited(); exited {
		return side, 0, fmt.Errorf("loadtest: the agent exited (%v):\n%s", err, tail(busy.p, 30))
	}
	return side, perScrape, nil
}

type ibAgent struct {
	p         *childproc.Process
	telemetry string
}

// scrapedPoints reads otelcol_scraper_scraped_metric_points of the ib
// receiver from the agent's telemetry.
func (a ibAgent) scrapedPoints(ctx context.Context) (int64, error) {
	page, err := get(ctx, "http://"+a.telemetry+"/metrics")
	if err != nil {
		if exited, exitErr := a.p.Exited(); exited {
			return 0, fmt.Errorf("loadtest: the agent exited (%v):\n%s", exitErr, tail(a.p, 30))
		}
		return 0, nil // not listening yet
	}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(string(page)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "otelcol_scraper_scraped_metric_points") || !strings.Contains(line, `receiver="ib"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("loadtest: telemetry: %q: %w", line, err)
		}
		total += int64(v)
	}
	return total, nil
}

func startIBAgent(opts IBOptions, tree string, ibBlock map[string]any, name string, interval time.Duration) (ibAgent, error) {
	telemetry, err := FreeAddr()
	if err != nil {
		return ibAgent{}, err
	}
	host, port, err := splitHostPort(telemetry)
	if err != nil {
		return ibAgent{}, err
	}
	portNum, _ := strconv.Atoi(port)
	cfg := map[string]any{
		"receivers": map[string]any{"ib": ibBlock},
		"exporters": map[string]any{"debug": map[string]any{"verbosity": "basic"}},
		"service": map[string]any{
			"telemetry": map[string]any{
				"logs": map[string]any{"level": "warn"},
				"metrics": map[string]any{"level": "normal", "readers": []any{map[string]any{"pull": map[string]any{
					"exporter": map[string]any{"prometheus": map[string]any{"host": host, "port": portNum}}}}}},
			},
			"pipelines": map[string]any{"metrics": map[string]any{"receivers": []any{"ib"}, "exporters": []any{"debug"}}},
		},
	}
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return ibAgent{}, fmt.Errorf("loadtest: %w", err)
	}
	path := filepath.Join(opts.Dir, name+".yaml")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		return ibAgent{}, fmt.Errorf("loadtest: %w", err)
	}
	env := append(opts.Runtime.added(), "SYSFS_ROOT="+tree, "IB_COLLECTION_INTERVAL="+interval.String(), "OTELCOL_GPU_HOST_NAME=ib-bench")
	p, err := startProcess(opts.Dir, name, env, opts.Agent, "--config", path)
	if err != nil {
		return ibAgent{}, err
	}
	return ibAgent{p: p, telemetry: telemetry}, nil
}

// shippedIBBlock is receivers.ib of the agent configuration, as written
// (its ${env:...} references resolved by the agent).
func shippedIBBlock(path string) (map[string]any, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	var cfg struct {
		Receivers map[string]map[string]any `yaml:"receivers"`
	}
	if err := yaml.Unmarshal(doc, &cfg); err != nil {
		return nil, fmt.Errorf("loadtest: %s: %w", path, err)
	}
	ib, ok := cfg.Receivers["ib"]
	if !ok {
		return nil, fmt.Errorf("loadtest: %s has no receivers.ib", path)
	}
	if ib == nil {
		ib = map[string]any{}
	}
	return ib, nil
}

// cpuOver measures pid's CPU over d, running work (if any) meanwhile;
// the window is d or work's duration, whichever is longer.
func cpuOver(ctx context.Context, pid int, d time.Duration, work func(context.Context) error) (time.Duration, time.Duration, error) {
	c0, err := ThreadsCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if work != nil {
		err = work(ctx)
	} else {
		err = sleep(ctx, d)
	}
	if err != nil {
		return 0, 0, err
	}
	c1, err := ThreadsCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	return c1 - c0, time.Since(t0), nil
}

// ThreadsCPU is the time pid's threads have run, summed over
// /proc/<pid>/task/*/schedstat (the first field, nanoseconds): finer than
// the clock ticks of /proc/<pid>/stat. A thread that exits takes its time
// with it; Go's threads live as long as the process.
func ThreadsCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("loadtest: %w", err)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if errors.Is(err, os.ErrNotExist) {
			continue // exited since the listing
		}
		if err != nil {
			return 0, fmt.Errorf("loadtest: %w", err)
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("loadtest: %s/%s/schedstat: empty", dir, t.Name())
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("loadtest: %s/%s/schedstat: %w", dir, t.Name(), err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// scrapeEvery GETs url every period for d and returns the answered scrapes.
func scrapeEvery(ctx context.Context, url string, period, d time.Duration) (int64, error) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	end := time.Now().Add(d)
	var n int64
	for time.Now().Before(end) {
		if _, err := get(ctx, url); err != nil {
			return n, err
		}
		n++
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-tick.C:
		}
	}
	return n, nil
}

func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return b, err
}

// WriteMarkdown prints the rounds and the median ratio.
func (c *IBComparison) WriteMarkdown(w io.Writer) {
	o := c.Options
	page := "its infiniband collector alone"
	if o.NodeExporterSelfMetrics {
		page = "its infiniband collector and its own go_*, process_*, promhttp_* series"
	}
	fmt.Fprintf(w, "IB CPU per scrape: %d RoCE devices (copies of %s, link_layer Ethernet), one scrape every %s for %s per process after a %s warm-up; agent: only the ib receiver as %s ships it (%d metrics a scrape), debug exporter; node_exporter: %s (%d node_infiniband_ samples a scrape)\n\n",
		o.Devices, o.Fixture, o.Interval, o.Duration, o.Warmup, o.AgentConfig, c.Metrics, page, c.Series)
	if runtime := o.Runtime.Env(); len(runtime) > 0 {
		fmt.Fprintf(w, "Agent Go runtime: %s; node_exporter: GOMAXPROCS=1 (its default)\n\n", strings.Join(runtime, " "))
	}
	fmt.Fprintln(w, "| round | node_exporter µs/scrape (scrapes; idle CPU) | agent µs/scrape (scrapes; idle CPU) | ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	var ratios []float64
	for i, r := range c.Rounds {
		ne, ag := r.NodeExporter, r.Agent
		fmt.Fprintf(w, "| %d | %.0f (%.0f; %.3f s / %.0f s) | %.0f (%.1f; %.3f s / %.0f s) | %.2f |\n", i+1,
			micros(ne.PerScrape()), ne.Scrapes, ne.IdleCPU.Seconds(), ne.Idle.Seconds(),
			micros(ag.PerScrape()), ag.Scrapes, ag.IdleCPU.Seconds(), ag.Idle.Seconds(), r.Ratio())
		ratios = append(ratios, r.Ratio())
	}
	slices.Sort(ratios)
	if len(ratios) > 0 {
		fmt.Fprintf(w, "\nMedian ratio %.2f (%.2f–%.2f); aim ≤ 0.5\n", ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
	}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
