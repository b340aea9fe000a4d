//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/grafana"
)

// Scrape jobs of deploy/prometheus/scrape.yaml, named as the rules and the
// dashboards select them.
const (
	agentJob   = "otelcol-gpu-agent"
	gatewayJob = "otelcol-gpu-gateway"
)

// dashboardQueriesWithData are the panels whose queries must return series
// in TestAgentKafkaGatewayPrometheus: its agent reads only the InfiniBand
// fixture (no DCGM, no training job, no fault), so GPU, step and fault
// panels run but stay empty there; the IB panels and the collectors' own
// telemetry have data. Keyed by dashboard file, then "panel title / refId".
var dashboardQueriesWithData = map[string][]string{
	"cluster-gpu-health.json": {
		"IB ports active / A", // "IB ports not active" stays empty: every fixture port is ACTIVE
		"IB port errors per second (top 20) / A",
		"IB throughput by node / A",
		"IB transmit wait per second / A",
		"IB link down / recovery (last 1h) / A",
		"Agents up / A", "Agents up / B",
		"Gateways up / A", "Gateways up / B",
		"Exported items per second / A",
		"Exporter queue fill / A",
		"Kafka consumer lag (gateway) / A",
		"Collector memory (RSS) / A",
		// vector(0) fallbacks: a number, not "No data", while nothing is open.
		"Open faults / A", "GPUs throttled (thermal) / A", "GPUs unresponsive / A",
	},
}

// checkDashboardQueries has Prometheus scrape the collectors' telemetry
// with the static jobs of deploy/prometheus/scrape.yaml, then runs every
// PromQL query of the Grafana dashboards (template variables substituted)
// against it: each must parse and run, those of dashboardQueriesWithData
// must return series.
func checkDashboardQueries(t *testing.T, prom *prometheus, telemetry map[string]string, watch ...*process) {
	scrapeCollectors(t, prom, telemetry, watch...)
	evaluated, withData := evalDashboardQueries(t, prom, "", dashboardQueriesWithData)
	if evaluated < 40 {
		t.Errorf("evaluated %d dashboard queries, want every PromQL query of the three dashboards", evaluated)
	}
	t.Logf("%d dashboard PromQL queries evaluated, %d returned series", evaluated, withData)
	for _, job := range []string{agentJob, gatewayJob} {
		// The numbers of docs/cardinality.md.
		if n, _, err := prom.scalar(fmt.Sprintf(`count({job=%q})`, job)); err == nil {
			t.Logf("%s: %v self-telemetry series", job, n)
		}
		if top, err := prom.query(fmt.Sprintf(`topk(8, count by (__name__) ({job=%q}))`, job), time.Time{}); err == nil {
			for _, s := range top {
				t.Logf("%s: %s %v", job, s.Labels["__name__"], s.Values[0][1])
			}
		}
	}
}

// evalDashboardQueries runs the PromQL queries of the dashboards (of one
// file, or all when file is empty), variable queries included: each must
// run, and those named in want (file -> "panel / refId") return series.
func evalDashboardQueries(t *testing.T, prom *prometheus, file string, want map[string][]string) (evaluated, withData int) {
	t.Helper()
	dashboards, err := grafana.Load()
	if err != nil {
		t.Fatal(err)
	}
	mustHave := map[string]bool{}
	for f, wheres := range want {
		for _, w := range wheres {
			mustHave[f+": "+w] = true
		}
	}
	found := map[string]bool{}
	for _, d := range dashboards {
		if file != "" && d.File != file {
			continue
		}
		queries := d.Queries()
		for _, v := range d.Templating.List {
			if v.Type == "query" {
				queries = append(queries, variableQuery(d.File, v))
			}
		}
		for _, q := range queries {
			if q.Type != "prometheus" {
				continue // no Loki or Tempo in these tests: their queries are checked for presence only (deploy/grafana)
			}
			key := q.Dashboard + ": " + q.Where
			promql := substituteVariables(q.Text)
			res, err := prom.query(promql, time.Time{})
			if err != nil {
				t.Errorf("%s: %v", key, err)
				continue
			}
			evaluated++
			if len(res) > 0 {
				withData++
			}
			if mustHave[key] {
				found[key] = true
				if len(res) == 0 {
					t.Errorf("%s: no series for %s", key, promql)
				}
			}
			t.Logf("%s: %d series", key, len(res))
		}
	}
	for key := range mustHave {
		if !found[key] {
			t.Errorf("%s: no such panel query in the dashboards", key)
		}
	}
	return evaluated, withData
}

// The GPU panels of the cluster dashboard against real dcgm-exporter
// scrapes (two nodes, one GPU each) read by the all-in-one collector with
// naming: otel and written with the gateway's remote-write settings. The
// fixtures have no DCGM_FI_PROF_SM_ACTIVE, no XID, ECC or NVLink counters
// that grow, so SM activity, XID, ECC and NVLink panels run but stay empty.
func TestClusterDashboardGPUQueries(t *testing.T) {
	collector := binary(t, "otelcol-gpu")
	prom := startPrometheus(t)
	nodes := map[string]string{
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
		names = append(names, "dcgm/"+node)
		fmt.Fprintf(&receivers, "  dcgm/%s:\n    source: exporter\n    endpoint: %s/metrics\n    naming: otel\n    host_name: %s\n    collection_interval: 1s\n    profiling_interval: 1s\n", node, srv.URL, node)
	}
	sort.Strings(names)
	// The gateway's prometheus_remote_write settings
	// (distributions/gateway/config.yaml), without its Kafka hop.
	cfg := fmt.Sprintf(`receivers:
%s
exporters:
  prometheus_remote_write:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
      excluded: [service.name, service.instance.id, service.namespace]
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

	const gpus = `count(count by (gpu_uuid) (hw_temperature_celsius{hw_sensor_location="gpu", host_name=~".*"}))`
	eventually(t, 60*time.Second, "both GPUs in Prometheus", func() error {
		v, _, err := prom.scalar(gpus)
		if err != nil {
			return err
		}
		if v != 2 {
			return fmt.Errorf("%v GPUs, want 2", v)
		}
		// rate() over 1m needs two samples of every series.
		n, _, err := prom.scalar(`min(count_over_time(hw_power_watts[1m]))`)
		if err != nil {
			return err
		}
		if n < 3 {
			return fmt.Errorf("%v samples of hw_power_watts so far", n)
		}
		return nil
	}, col, prom.proc)

	evaluated, withData := evalDashboardQueries(t, prom, "cluster-gpu-health.json", map[string][]string{
		"cluster-gpu-health.json": {
			"GPUs reporting / A", "Nodes reporting GPUs / A", "Cluster GPU utilisation / A",
			"GPU temperature by node (hottest GPU) / A", "GPU power by node / A",
			"GPU utilisation by node (mean) / A", "variable host",
		},
	})
	t.Logf("%d cluster dashboard PromQL queries evaluated, %d returned series", evaluated, withData)
	// The stat panels count what the fixtures hold: two GPUs on two nodes.
	for q, want := range map[string]float64{
		gpus: 2,
		`count(count by (host_name) (hw_temperature_celsius{hw_sensor_location="gpu", host_name=~".*"}))`: 2,
	} {
		if v, _, err := prom.scalar(q); err != nil || v != want {
			t.Errorf("%s = %v (%v), want %v", q, v, err, want)
		}
	}
}

// variableQuery turns a label_values(metric, label) variable into the
// PromQL Grafana runs for it.
func variableQuery(file string, v grafana.Variable) grafana.Query {
	var q struct {
		Query string `json:"query"`
	}
	_ = yaml.Unmarshal(v.Query, &q) // JSON is YAML; a plain string leaves Query empty
	text := q.Query
	if m := labelValuesWithSelector.FindStringSubmatch(text); m != nil {
		text = fmt.Sprintf("group by (%s) (%s)", m[2], m[1])
	}
	return grafana.Query{Dashboard: file, Where: "variable " + v.Name, Type: "prometheus", Text: text}
}

var labelValuesWithSelector = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// Grafana's interval variables, at this test's scale.
var intervalVariables = strings.NewReplacer(
	"$__rate_interval", "1m", "${__rate_interval}", "1m",
	"$__interval", "1m", "${__interval}", "1m",
	"$__range", "5m", "${__range}", "5m",
)

// A label matcher on a dashboard variable ($job, $host, ...): "All" and any
// single value are covered by the regex .* over the whole label.
var variableMatcher = regexp.MustCompile(`(\w+)\s*=~?\s*"\$\{?\w+\}?"`)

func substituteVariables(q string) string {
	q = intervalVariables.Replace(q)
	return variableMatcher.ReplaceAllString(q, `$1=~".*"`)
}

func TestSubstituteVariables(t *testing.T) {
	for in, want := range map[string]string{
		`rate(x{host_name=~"$host"}[$__rate_interval])`:                       `rate(x{host_name=~".*"}[1m])`,
		`x{training_job_id="$job", training_attempt=~"${attempt}"}`:           `x{training_job_id=~".*", training_attempt=~".*"}`,
		`increase(y{a="b"}[1h])`:                                              `increase(y{a="b"}[1h])`,
		`count_over_time(z[$__interval]) / ${__range}`:                        `count_over_time(z[1m]) / 5m`,
		`label_values(training_step_duration_seconds_count, training_job_id)`: `label_values(training_step_duration_seconds_count, training_job_id)`,
	} {
		if got := substituteVariables(in); got != want {
			t.Errorf("substituteVariables(%q) = %q, want %q", in, got, want)
		}
	}
}

// scrapeCollectors rewrites the test Prometheus's configuration to scrape
// the collectors with the static jobs of deploy/prometheus/scrape.yaml
// (targets replaced by this test's telemetry addresses, every second) and
// the rules of rules.yaml, reloads it (SIGHUP) and waits for both jobs.
func scrapeCollectors(t *testing.T, prom *prometheus, telemetry map[string]string, watch ...*process) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "prometheus")
	cfg := readScrapeConfig(t, filepath.Join(dir, "scrape.yaml"))
	var jobs []map[string]any
	for _, sc := range cfg.ScrapeConfigs {
		statics, ok := sc["static_configs"].([]any)
		if !ok {
			continue // kubernetes_sd_configs: no cluster here
		}
		for _, s := range statics {
			static := s.(map[string]any)
			job, _ := static["labels"].(map[string]any)["job"].(string)
			addr, ok := telemetry[job]
			if !ok {
				t.Fatalf("scrape.yaml: static job %v for unknown job label %q", sc["job_name"], job)
			}
			static["targets"] = []string{addr}
		}
		sc["scrape_interval"] = "1s"
		sc["scrape_timeout"] = "1s"
		jobs = append(jobs, sc)
	}
	if len(jobs) != len(telemetry) {
		t.Fatalf("scrape.yaml has %d static jobs, want one for each of %v", len(jobs), telemetry)
	}
	out, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "15s", "evaluation_interval": "5s"},
		"rule_files":     []string{filepath.Join(dir, "rules.yaml")},
		"scrape_configs": jobs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prom.configFile(t), out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prom.proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for job := range telemetry {
		eventually(t, 60*time.Second, job+" scraped", func() error {
			v, _, err := prom.scalar(fmt.Sprintf(`sum(up{job=%q})`, job))
			if err != nil {
				return err
			}
			if v != 1 {
				return fmt.Errorf("up{job=%q} = %v", job, v)
			}
			// Two scrapes at least, so that rate() over 1m has two samples.
			n, _, err := prom.scalar(fmt.Sprintf(`count_over_time(up{job=%q}[1m])`, job))
			if err != nil {
				return err
			}
			if n < 3 {
				return fmt.Errorf("%v scrapes of %s so far", n, job)
			}
			return nil
		}, append(watch, prom.proc)...)
	}
}

// configFile returns the --config.file path Prometheus was started with.
func (p *prometheus) configFile(t *testing.T) string {
	for _, a := range p.proc.Args() {
		if f, ok := strings.CutPrefix(a, "--config.file="); ok {
			return f
		}
	}
	t.Fatal("prometheus was started without --config.file")
	return ""
}

type scrapeFile struct {
	Global        map[string]any   `yaml:"global"`
	RuleFiles     []string         `yaml:"rule_files"`
	ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
}

func readScrapeConfig(t *testing.T, path string) scrapeFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f scrapeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// TestPrometheusScrapeConfig checks deploy/prometheus/scrape.yaml: the
// Kubernetes jobs carry the job names the rules use and keep only the
// telemetry ports; promtool checks the file (Debian's promtool is built
// without Kubernetes discovery, so it checks the file less those two jobs).
func TestPrometheusScrapeConfig(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "prometheus")
	f := readScrapeConfig(t, filepath.Join(dir, "scrape.yaml"))
	ports := map[string]string{agentJob: "8888", gatewayJob: "8889"}
	var k8sJobs []string
	var rest []map[string]any
	staticJobs := map[string]bool{}
	for _, sc := range f.ScrapeConfigs {
		name, _ := sc["job_name"].(string)
		if _, ok := sc["kubernetes_sd_configs"]; !ok {
			rest = append(rest, sc)
			for _, s := range sc["static_configs"].([]any) {
				job, _ := s.(map[string]any)["labels"].(map[string]any)["job"].(string)
				staticJobs[job] = true
			}
			continue
		}
		k8sJobs = append(k8sJobs, name)
		raw, _ := yaml.Marshal(sc)
		if !strings.Contains(string(raw), "app.kubernetes.io/name="+name) {
			t.Errorf("job %s does not select pods labelled app.kubernetes.io/name=%s", name, name)
		}
		if !strings.Contains(string(raw), `regex: "`+ports[name]+`"`) {
			t.Errorf("job %s does not keep port %s only:\n%s", name, ports[name], raw)
		}
	}
	sort.Strings(k8sJobs)
	if strings.Join(k8sJobs, ",") != agentJob+","+gatewayJob {
		t.Errorf("kubernetes jobs %v, want %s and %s", k8sJobs, agentJob, gatewayJob)
	}
	if !staticJobs[agentJob] || !staticJobs[gatewayJob] {
		t.Errorf("static examples set job labels %v, want %s and %s", staticJobs, agentJob, gatewayJob)
	}

	tmp := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "rules.yaml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(map[string]any{"global": f.Global, "rule_files": f.RuleFiles, "scrape_configs": rest})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(tmp, "scrape.yaml")
	if err := os.WriteFile(cfg, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(lookPath(t, "promtool"), "check", "config", cfg).CombinedOutput(); err != nil {
		t.Errorf("promtool check config: %v\n%s", err, msg)
	}
}

// The job-steps dashboard's Prometheus panels against the stepmetrics
// connector's series: the all-in-one collector receives two ranks' train.step
// spans over OTLP/HTTP and writes the connector's metrics with the
// gateway's remote-write settings. The Tempo and Loki panels are not run
// (no Tempo or Loki here).
func TestJobStepsDashboardQueries(t *testing.T) {
	collector := binary(t, "otelcol-gpu")
	prom := startPrometheus(t)
	httpAddr := freeAddr(t)
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
connectors:
  stepmetrics:
    interval: 1s
exporters:
  prometheus_remote_write:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
      excluded: [service.name, service.instance.id, service.namespace]
    target_info:
      enabled: false
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [stepmetrics]
    metrics:
      receivers: [stepmetrics]
      exporters: [prometheus_remote_write]
`, httpAddr, prom.writeURL())
	col := startWithConfig(t, "otelcol-gpu", collector, cfg)

	// Steps 1..n of job e2e-job, two ranks on H100s; rank 1 takes 1.5 s,
	// rank 0 1 s, so every step's time (its slowest rank's) is 1.5 s.
	const n = 8
	start := time.Now().Add(-time.Duration(n) * 2 * time.Second)
	send := func(step int) error {
		var ranks []string
		for rank, dur := range []time.Duration{time.Second, 1500 * time.Millisecond} {
			s := start.Add(time.Duration(step) * 2 * time.Second)
			ranks = append(ranks, fmt.Sprintf(`{"resource":{"attributes":[
{"key":"service.name","value":{"stringValue":"train"}},
{"key":"training.job.id","value":{"stringValue":"e2e-job"}},
{"key":"training.attempt","value":{"intValue":"0"}},
{"key":"training.rank","value":{"intValue":"%d"}},
{"key":"training.world_size","value":{"intValue":"2"}},
{"key":"gpu.model","value":{"stringValue":"NVIDIA H100 80GB HBM3"}}]},
"scopeSpans":[{"spans":[{"traceId":"%032x","spanId":"%016x","name":"train.step","kind":1,
"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[
{"key":"iteration.step","value":{"intValue":"%d"}},
{"key":"training.tokens","value":{"intValue":"4096"}},
{"key":"training.flops","value":{"doubleValue":1e14}},
{"key":"training.phase.dataload_ns","value":{"intValue":"100000000"}}]}]}]}`,
				rank, step+1, step*16+rank+1, s.UnixNano(), s.Add(dur).UnixNano(), step))
		}
		body := `{"resourceSpans":[` + strings.Join(ranks, ",") + `]}`
		resp, err := http.Post("http://"+httpAddr+"/v1/traces", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("OTLP/HTTP status %d", resp.StatusCode)
		}
		return nil
	}
	// Two batches, each awaited in Prometheus: the connector emits only
	// when a step closed, and rate() needs two samples.
	steps := func(want float64) error {
		v, _, err := prom.scalar(`training_step_duration_seconds_count{training_job_id="e2e-job"}`)
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("%v steps, want %v", v, want)
		}
		return nil
	}
	eventually(t, 60*time.Second, "collector accepts OTLP/HTTP", func() error { return send(1) }, col)
	for step := 2; step <= n/2; step++ {
		if err := send(step); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "first steps in Prometheus", func() error { return steps(n / 2) }, col, prom.proc)
	for step := n/2 + 1; step <= n; step++ {
		if err := send(step); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "all steps in Prometheus", func() error { return steps(n) }, col, prom.proc)

	if names, err := prom.query(`group by (__name__) ({training_job_id="e2e-job"})`, time.Time{}); err == nil {
		for _, s := range names {
			t.Logf("series name: %s", s.Labels["__name__"])
		}
	}
	evaluated, withData := evalDashboardQueries(t, prom, "job-steps.json", map[string][]string{
		"job-steps.json": {
			"variable job", "variable attempt",
			"Step time distribution / A",
			"Step time p50 / p99 / max / A", "Step time p50 / p99 / max / B", "Step time p50 / p99 / max / C", "Step time p50 / p99 / max / D",
			"Steps per second / A", "Tokens per second / A", "MFU / A", "Data-load share / A",
		},
	})
	t.Logf("%d job-steps PromQL queries evaluated, %d returned series", evaluated, withData)
	// The 1.5 s steps land in the (1, 1.5] bucket, so the p50 over the whole
	// histogram is within it.
	v, _, err := prom.scalar(`histogram_quantile(0.5, sum by (le) (training_step_duration_seconds_bucket{training_job_id="e2e-job"}))`)
	if err != nil {
		t.Fatal(err)
	}
	if v <= 1 || v > 1.5 {
		t.Errorf("p50 step time %v s, want in (1, 1.5]", v)
	}
}
