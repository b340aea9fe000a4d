//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// Two GPU nodes, each serving a real dcgm-exporter scrape, are read by the
// all-in-one collector with `naming: dcgm_exporter` and written to a real
// Prometheus. Every query of dcgm-exporter's Grafana dashboard (12239) must
// then answer with the series the dashboard expects.
func TestDCGMExporterDashboardQueries(t *testing.T) {
	collector := binary(t, "otelcol-gpu")
	prom := startPrometheus(t)

	nodes := map[string]string{ // instance -> scrape fixture
		"node-l4":   "cncf-k8s-ai-conformance_kops_NVIDIA-L4_dcgm-exporter-metrics.prom",
		"node-l40s": "cncf-k8s-ai-conformance_upcloud_NVIDIA-L40S_dcgm-exporter-metrics.prom",
	}
	var receivers strings.Builder
	var names []string
	for node, fixture := range nodes {
		page := exporterPageOf(t, fixture, node)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write(page)
		}))
		t.Cleanup(srv.Close)
		name := "dcgm/" + node
		names = append(names, name)
		fmt.Fprintf(&receivers, `  %s:
    source: exporter
    endpoint: %s/metrics
    naming: dcgm_exporter
    host_name: %s
    collection_interval: 1s
    profiling_interval: 1s
`, name, srv.URL, node)
	}
	sort.Strings(names)
	cfg := fmt.Sprintf(`receivers:
%s
exporters:
  prometheus_remote_write:
    endpoint: %s
    translation_strategy: UnderscoreEscapingWithoutSuffixes  # add_metric_suffixes: false, not deprecated
    resource_constant_labels:
      included: ["*"]
    target_info:
      enabled: false
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [%s]
      exporters: [prometheus_remote_write]
`, receivers.String(), prom.writeURL(), strings.Join(names, ", "))
	col := startWithConfig(t, "otelcol-gpu", collector, cfg)

	// The dashboard's template variables.
	eventually(t, 60*time.Second, "both instances in Prometheus", func() error {
		res, err := prom.query(`group by (instance) (DCGM_FI_DEV_GPU_TEMP)`, time.Time{})
		if err != nil {
			return err
		}
		var got []string
		for _, s := range res {
			got = append(got, s.Labels["instance"])
		}
		sort.Strings(got)
		if strings.Join(got, ",") != "node-l4,node-l40s" {
			return fmt.Errorf("instances %v, want node-l4, node-l40s", got)
		}
		return nil
	}, col, prom.proc)

	checkGrafana12239(t, prom, func(t *testing.T, labels map[string]string) {
		if labels["instance"] != labels["Hostname"] {
			t.Errorf("instance %q and Hostname %q differ", labels["instance"], labels["Hostname"])
		}
	})

	// Values arrive unchanged: the L4 fixture's SM clock is 210 MHz, and the
	// dashboard multiplies by 1e6 itself.
	v, _, err := prom.scalar(`DCGM_FI_DEV_SM_CLOCK{instance="node-l4"} * 1000000`)
	if err != nil {
		t.Fatal(err)
	}
	if v != 210e6 {
		t.Errorf("SM clock of node-l4 = %v Hz, want 210e6", v)
	}
}

var labelValues = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)

// readDashboardQueries returns the PromQL lines of the dashboard file.
func readDashboardQueries(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// exporterPageOf is the dcgm-exporter page fixture as node's own exporter
// would serve it: its Hostname label names node. The agent refuses samples
// of a page naming another node (an agent speaks only for its own).
func exporterPageOf(t *testing.T, fixture, node string) []byte {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`Hostname="[^"]*"`).ReplaceAll(page, []byte(`Hostname="`+node+`"`))
}

// checkGrafana12239 runs every query of dcgm-exporter's Grafana dashboard
// 12239 against prom, which holds one GPU of each of two nodes: a
// label_values variable must find values, a panel one series per GPU (one
// when aggregated), each with dcgm-exporter's labels; checkSeries checks
// what else a caller expects of a panel's series.
func checkGrafana12239(t *testing.T, prom *prometheus, checkSeries func(t *testing.T, labels map[string]string)) {
	t.Helper()
	queries := readDashboardQueries(t, filepath.Join("testdata", "grafana-12239-queries.txt"))
	if len(queries) < 8 {
		t.Fatalf("only %d queries read from the dashboard file", len(queries))
	}
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			if m := labelValues.FindStringSubmatch(q); m != nil {
				// label_values(metric, label) is Grafana's; in PromQL it is a
				// group by over the metric.
				res, err := prom.query(fmt.Sprintf("group by (%s) (%s)", m[2], m[1]), time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				if len(res) == 0 {
					t.Fatalf("no values of %s on %s", m[2], m[1])
				}
				for _, s := range res {
					if s.Labels[m[2]] == "" {
						t.Errorf("a series of %s has no %s label", m[1], m[2])
					}
				}
				return
			}
			// Panels: $instance and $gpu are regex-matched; "All" is .*
			promql := strings.NewReplacer(`"$instance"`, `".*"`, `"$gpu"`, `".*"`).Replace(q)
			res, err := prom.query(promql, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			aggregated := strings.HasPrefix(q, "avg(") || strings.HasPrefix(q, "sum(")
			want := 2 // one GPU on each node
			if aggregated {
				want = 1
			}
			if len(res) != want {
				t.Fatalf("%d series, want %d: %v", len(res), want, res)
			}
			if aggregated {
				return
			}
			for _, s := range res {
				for _, l := range []string{"instance", "gpu", "UUID", "modelName", "pci_bus_id", "device", "Hostname"} {
					if s.Labels[l] == "" {
						t.Errorf("series %v lacks the %s label", s.Labels, l)
					}
				}
				checkSeries(t, s.Labels)
			}
		})
	}
}
