//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"
)

// extraFamilies are the agent's additions to dcgm-exporter's page: a GPU
// whose driver calls hang is reported (dcgm-exporter's page just stops).
var extraFamilies = []string{"DCGM_EXP_GPU_UNRESPONSIVE"}

// The agent's Prometheus endpoint (distributions/agent/prometheus-endpoint.yaml)
// against dcgm-exporter's own page for the same GPUs: the real agent binary
// reads a real dcgm-exporter page (the exporter source, Hostname = the
// agent's node) and serves it again on its endpoint; the series set (metric
// names, types, label names of every series) must be identical, so a scrape
// config can switch from dcgm-exporter to the agent. The help texts are
// identical too: without a counters CSV (the built-in catalogue's) and with
// the CSV the page's own fields were chosen with (dcgm-exporter's
// DCGM_EXPORTER_COLLECTORS). Since issue 31 also series by series: every
// label value and sample value, on every real page of the fixtures (L4,
// L40S, an A100 vGPU guest, a T4 saved without HELP/TYPE lines).
func TestPrometheusEndpointMatchesDCGMExporter(t *testing.T) {
	for _, fixture := range []string{
		"cncf-k8s-ai-conformance_kops_NVIDIA-L4_dcgm-exporter-metrics.prom",
		"cncf-k8s-ai-conformance_upcloud_NVIDIA-L40S_dcgm-exporter-metrics.prom",
		"cncf-k8s-ai-conformance_vks_GRID-A100-10C_dcgm-exporter-metrics.prom",
		"cncf-k8s-ai-conformance_ericsson-ccd_Tesla-T4_dcgm-exporter-metrics.prom",
	} {
		for _, withCSV := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/collectors_csv=%v", strings.Split(fixture, "_")[2], withCSV), func(t *testing.T) {
				const node = "gpu-node-7"
				page := exporterPageOf(t, fixture, node)
				want := parsePage(t, page)
				csv := ""
				if withCSV {
					csv = filepath.Join(t.TempDir(), "counters.csv")
					if err := os.WriteFile(csv, countersCSVOf(want), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				listen, proc := startAgentPage(t, page, node, csv)

				var got map[string]*dto.MetricFamily
				eventually(t, 60*time.Second, "every family of the fixture on the agent's page", func() (err error) {
					if got, err = scrapePage("http://" + listen + "/metrics"); err != nil {
						return err
					}
					for name := range want {
						if _, ok := got[name]; !ok {
							return fmt.Errorf("%s not on the page yet", name)
						}
					}
					return nil
				}, proc)

				// Help texts too, with or without the CSV: the built-in
				// catalogue's are dcgm-exporter's default-counters.csv's.
				// Series by series (issue 31): every label value and every
				// sample value is the page's.
				for _, d := range diffSeriesSets(want, got, true) {
					t.Error(d)
				}
				for _, d := range diffSeriesValues(want, got) {
					t.Error(d)
				}
			})
		}
	}
}

// startAgentPage serves page as node's dcgm-exporter would and starts the
// real agent with prometheus-endpoint.yaml reading it (the exporter source,
// host_name node); csv, when set, is its DCGM_EXPORTER_COLLECTORS. It
// returns the address of the agent's page.
func startAgentPage(t *testing.T, page []byte, node, csv string) (string, *process) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(page)
	}))
	t.Cleanup(srv.Close)
	override := filepath.Join(t.TempDir(), "test.yaml")
	if err := os.WriteFile(override, []byte("service:\n  telemetry:\n    metrics:\n      level: none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	env := []string{"GPU_SOURCE=exporter", "DCGM_ENDPOINT=" + srv.URL + "/metrics", "OTELCOL_GPU_HOST_NAME=" + node,
		"DCGM_EXPORTER_LISTEN=" + listen, "DCGM_EXPORTER_INTERVAL=1000"} // milliseconds, as dcgm-exporter reads it
	if csv != "" {
		env = append(env, "DCGM_EXPORTER_COLLECTORS="+csv)
	}
	fragment := filepath.Join(repoRoot(t), "distributions", "agent", "prometheus-endpoint.yaml")
	return listen, startProcess(t, "agent-"+node, env, binary(t, "otelcol-gpu-agent"), "--config", fragment, "--config", override)
}

// Grafana 12239 on a real Prometheus that scrapes two agents' pages (no
// remote write): every query answers with the series and labels the
// dashboard expects, job and instance are the scrape's (the page has none
// of its own: no exported_job, no exported_instance), values unchanged.
func TestGrafana12239OnScrapedAgentPages(t *testing.T) {
	targets := map[string]string{} // node -> agent page address
	var procs []*process
	for node, fixture := range map[string]string{
		"node-l4":   "cncf-k8s-ai-conformance_kops_NVIDIA-L4_dcgm-exporter-metrics.prom",
		"node-l40s": "cncf-k8s-ai-conformance_upcloud_NVIDIA-L40S_dcgm-exporter-metrics.prom",
	} {
		addr, proc := startAgentPage(t, exporterPageOf(t, fixture, node), node, "")
		targets[node] = addr
		procs = append(procs, proc)
	}
	prom := startScrapingPrometheus(t, "dcgm-exporter", []string{targets["node-l4"], targets["node-l40s"]})
	procs = append(procs, prom.proc)

	eventually(t, 60*time.Second, "both agents' pages scraped", func() error {
		res, err := prom.query(`group by (instance) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)`, time.Time{})
		if err != nil {
			return err
		}
		if len(res) != 2 {
			return fmt.Errorf("%d instances, want 2: %v", len(res), res)
		}
		return nil
	}, procs...)

	checkGrafana12239(t, prom, func(t *testing.T, labels map[string]string) {
		for _, l := range []string{"exported_job", "exported_instance", "otel_scope_name", "service_name"} {
			if _, ok := labels[l]; ok {
				t.Errorf("series %v has %s: the page must carry no job, instance or OpenTelemetry labels", labels, l)
			}
		}
		if labels["instance"] != targets[labels["Hostname"]] {
			t.Errorf("instance %q is not the scrape target of %s (%s)", labels["instance"], labels["Hostname"], targets[labels["Hostname"]])
		}
	})
	v, _, err := prom.scalar(`DCGM_FI_DEV_SM_CLOCK{Hostname="node-l4"} * 1000000`)
	if err != nil {
		t.Fatal(err)
	}
	if v != 210e6 {
		t.Errorf("SM clock of node-l4 = %v Hz, want 210e6", v)
	}
	res, err := prom.query(`count by (__name__) ({job="dcgm-exporter", __name__="target_info"})`, time.Time{})
	if err != nil || len(res) != 0 {
		t.Errorf("target_info on the page (%v, %v): the page must be dcgm-exporter's alone", res, err)
	}
}

// startScrapingPrometheus starts Prometheus scraping targets every second
// as job.
func startScrapingPrometheus(t *testing.T, job string, targets []string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	yml := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: %s\n    static_configs:\n      - targets: [%s]\n",
		job, strings.Join(targets, ", "))
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProcess(t, "prometheus", nil, lookPath(t, "prometheus"),
		"--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	waitHTTP(t, "http://"+addr+"/-/ready", p)
	return &prometheus{addr: addr, proc: p}
}

// scrapePage reads a Prometheus page's families.
func scrapePage(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func parsePage(t *testing.T, page []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(page)))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// countersCSVOf is the counters CSV a dcgm-exporter serving page would have
// been started with: its families with their types and help texts, and the
// driver version as a label.
func countersCSVOf(page map[string]*dto.MetricFamily) []byte {
	var b strings.Builder
	b.WriteString("# DCGM FIELD, Prometheus metric type, help message\n")
	for _, name := range familyNames(page) {
		f := page[name]
		typ := strings.ToLower(f.GetType().String())
		if f.GetType() == dto.MetricType_UNTYPED {
			typ = "gauge" // a page saved without TYPE lines
		}
		fmt.Fprintf(&b, "%s, %s, %q\n", name, typ, f.GetHelp())
	}
	b.WriteString("DCGM_FI_DRIVER_VERSION, label, Driver Version\n")
	return []byte(b.String())
}

// diffSeriesSets lists how got differs from want: missing or extra
// families, types, help texts (when compared), and each family's set of
// series label-name sets.
func diffSeriesSets(want, got map[string]*dto.MetricFamily, help bool) []string {
	var diffs []string
	for _, name := range familyNames(want) {
		w, g := want[name], got[name]
		if g == nil {
			diffs = append(diffs, name+": missing on the agent's page")
			continue
		}
		if w.GetType() == dto.MetricType_UNTYPED && w.GetHelp() == "" {
			// a page saved without its HELP and TYPE lines (the T4's):
			// nothing to compare them with
		} else if w.GetType() != g.GetType() {
			diffs = append(diffs, fmt.Sprintf("%s: type %s, dcgm-exporter's %s", name, g.GetType(), w.GetType()))
		}
		if help && w.GetHelp() != "" && w.GetHelp() != g.GetHelp() {
			diffs = append(diffs, fmt.Sprintf("%s: help %q, dcgm-exporter's %q", name, g.GetHelp(), w.GetHelp()))
		}
		if ws, gs := labelSets(w), labelSets(g); !slices.Equal(ws, gs) {
			diffs = append(diffs, fmt.Sprintf("%s: series label names %v, dcgm-exporter's %v", name, gs, ws))
		}
	}
	for _, name := range familyNames(got) {
		if _, ok := want[name]; !ok && !slices.Contains(extraFamilies, name) {
			diffs = append(diffs, name+": on the agent's page, not on dcgm-exporter's")
		}
	}
	return diffs
}

// diffSeriesValues lists the series of want whose labels (names and
// values, empty values left out) or value got does not have.
func diffSeriesValues(want, got map[string]*dto.MetricFamily) []string {
	var diffs []string
	for _, name := range familyNames(want) {
		if got[name] == nil {
			diffs = append(diffs, name+": no such family on the other page")
			continue
		}
		gs := seriesValues(got[name])
		for labels, v := range seriesValues(want[name]) {
			if gv, ok := gs[labels]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s{%s}: no such series on the other page", name, labels))
			} else if gv != v {
				diffs = append(diffs, fmt.Sprintf("%s{%s}: %v, want %v", name, labels, gv, v))
			}
		}
	}
	return diffs
}

func labelSets(f *dto.MetricFamily) []string {
	var sets []string
	for _, m := range f.GetMetric() {
		var names []string
		for _, l := range m.GetLabel() {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		sets = append(sets, strings.Join(names, ","))
	}
	sort.Strings(sets)
	return slices.Compact(sets)
}

func familyNames(m map[string]*dto.MetricFamily) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dcgm-exporter's README sample leaks DCGM_INT64_NOT_SUPPORTED
// (9223372036854775794) as a value: a series dcgm-exporter itself drops
// when it reads the field as not supported. The agent drops it and keeps
// the other samples' values.
func TestPrometheusEndpointDropsNotSupportedSentinels(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("testdata", "dcgm-exporter_README_quickstart-metrics-snippet.prom"))
	if err != nil {
		t.Fatal(err)
	}
	listen, proc := startAgentPage(t, page, "gpu-node-9", "")
	var got map[string]*dto.MetricFamily
	eventually(t, 60*time.Second, "the README sample's clocks on the agent's page", func() (err error) {
		if got, err = scrapePage("http://" + listen + "/metrics"); err != nil {
			return err
		}
		if got["DCGM_FI_DEV_SM_CLOCK"] == nil || got["DCGM_FI_DEV_MEM_CLOCK"] == nil {
			return fmt.Errorf("clocks not on the page yet")
		}
		return nil
	}, proc)
	for name, want := range map[string]float64{"DCGM_FI_DEV_SM_CLOCK": 139, "DCGM_FI_DEV_MEM_CLOCK": 405} {
		ms := got[name].GetMetric()
		if len(ms) != 1 || ms[0].GetGauge().GetValue() != want {
			t.Errorf("%s: %v, want one series of %v", name, ms, want)
		}
	}
	if f := got["DCGM_FI_DEV_MEMORY_TEMP"]; f != nil {
		t.Errorf("the not-supported sentinel is on the page: %v", f.GetMetric())
	}
}
