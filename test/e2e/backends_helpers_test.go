//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The real trace and log backends of the end-to-end tests, in Tempo's and
// Loki's places (docs/backends.md): Jaeger v2 and VictoriaLogs, built from
// the module proxy into .tools/bin by `make backends` (mk/backends.mk).

// tool returns a program `make backends` installs into .tools/bin; a
// missing one fails the test with the command that builds it.
func tool(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(repoRoot(t), ".tools", "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not installed (run `make backends`, or `make tools`, from the repository root): %v", path, err)
	}
	return path
}

// jaeger is a Jaeger v2 process: an OTLP gRPC receiver (the gateway's
// otlp_grpc/tempo exporter points at it), in-memory storage and the query
// service, whose HTTP API the test reads traces from.
type jaeger struct {
	otlpGRPC string // host:port, TEMPO_OTLP_ENDPOINT
	query    string // host:port of jaeger_query's HTTP API
	proc     *process
}

// jaegerConfig is Jaeger's own collector configuration: only the OTLP gRPC
// receiver, memory storage and the query service, every port on loopback
// and chosen by the test (the defaults, 4317 and 16686, may be taken), and
// no telemetry endpoint of its own (its default, :8888, would be shared by
// every Jaeger the tests start).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

func startJaeger(t *testing.T) *jaeger {
	bin := tool(t, "jaeger")
	j := &jaeger{otlpGRPC: freeAddr(t), query: freeAddr(t)}
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(jaegerConfig, j.query, freeAddr(t), j.otlpGRPC)), 0o600); err != nil {
		t.Fatal(err)
	}
	j.proc = startProcess(t, "jaeger", nil, bin, "--config", cfg)
	// The query API answers once storage and the receiver are up: the
	// extensions start before the pipelines, and the collector reports
	// ready only after both.
	waitHTTP(t, "http://"+j.query+"/api/v3/services", j.proc)
	eventually(t, 30*time.Second, "Jaeger's OTLP gRPC receiver at "+j.otlpGRPC, func() error {
		c, err := netDial(j.otlpGRPC)
		if err == nil {
			c.Close()
		}
		return err
	}, j.proc)
	return j
}

// trace fetches one trace by id through Jaeger's API v3
// (GET /api/v3/traces/{id}), whose answer is OTLP JSON under "result". A
// trace Jaeger does not have is (nil, nil): the caller polls.
func (j *jaeger) trace(id pcommon.TraceID) (*ptrace.Traces, error) {
	u := "http://" + j.query + "/api/v3/traces/" + id.String()
	body, status, err := httpGet(u)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound {
		return nil, nil
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %s", u, status, body)
	}
	var wrapper struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &wrapper); err != nil {
		return nil, fmt.Errorf("GET %s: %w: %.500s", u, err, body)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(wrapper.Result)
	if err != nil {
		return nil, fmt.Errorf("GET %s: result is not OTLP JSON: %w: %.500s", u, err, wrapper.Result)
	}
	return &td, nil
}

// victoriaLogs is a VictoriaLogs process: OTLP/HTTP logs in at
// /insert/opentelemetry/v1/logs (the gateway's otlp_http/loki and
// otlp_http/loki_faults exporters point at it), LogsQL out at
// /select/logsql/query.
type victoriaLogs struct {
	addr string
	proc *process
}

func startVictoriaLogs(t *testing.T) *victoriaLogs {
	bin := tool(t, "victoria-logs")
	v := &victoriaLogs{addr: freeAddr(t)}
	v.proc = startProcess(t, "victoria-logs", nil, bin,
		"-httpListenAddr="+v.addr,
		"-storageDataPath="+filepath.Join(t.TempDir(), "vlogs"),
	)
	waitHTTP(t, "http://"+v.addr+"/health", v.proc)
	return v
}

// otlpEndpoint is the base URL an OTLP/HTTP exporter appends /v1/logs to:
// LOKI_OTLP_ENDPOINT of the shipped gateway config.
func (v *victoriaLogs) otlpEndpoint() string { return "http://" + v.addr + "/insert/opentelemetry" }

// query runs a LogsQL query over all time and returns its rows, each a
// map of field name to value (VictoriaLogs answers one JSON object a line,
// every value a string).
func (v *victoriaLogs) query(q string) ([]map[string]string, error) {
	u := "http://" + v.addr + "/select/logsql/query?" + url.Values{"query": {q}}.Encode()
	body, status, err := httpGet(u)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("LogsQL %q: status %d: %s", q, status, body)
	}
	var rows []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		row := map[string]string{}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("LogsQL %q: a row that is not a JSON object of strings: %w: %s", q, err, sc.Text())
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

func httpGet(u string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// faultsInLogBackend waits until every fault record read from gpu_faults
// is in VictoriaLogs too, under its fault.id with its type and state: the
// gateway's otlp_http/loki_faults copy, found the way docs/backends.md
// says.
func faultsInLogBackend(t *testing.T, v *victoriaLogs, records []fault.Record, watch ...*process) {
	t.Helper()
	type key struct{ id, typ, state string }
	want := map[key]bool{}
	for _, r := range records {
		want[key{r.ID, string(r.Type), string(r.State)}] = true
	}
	q := fmt.Sprintf("event_name:=%q", fault.EventName)
	eventually(t, time.Minute, fmt.Sprintf("the %d records of gpu_faults in VictoriaLogs", len(records)), func() error {
		rows, err := v.query(q)
		if err != nil {
			return err
		}
		got := map[key]bool{}
		for _, row := range rows {
			got[key{row[fault.AttrID], row[fault.AttrType], row[fault.AttrState]}] = true
		}
		for k := range want {
			if !got[k] {
				return fmt.Errorf("fault %s (%s, %s) not found by %s (%d rows)", k.id, k.typ, k.state, q, len(rows))
			}
		}
		return nil
	}, watch...)
}
