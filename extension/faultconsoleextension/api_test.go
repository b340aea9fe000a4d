package faultconsoleextension

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
)

const testToken = "test-token-0123456789abcdef"

type apiFixture struct {
	api   *api
	store *store
	ctrl  *consoletest.Controller
	tel   *componenttest.Telemetry
	logs  *observer.ObservedLogs
	clock *fakeClock
	onset time.Time
}

// newFixture is an API over a store holding two faults (one resolved), a
// job of 4 ranks × 3 steps with rank 3 a straggler in steps 2 and 3, and a
// recording controller holding node-b with a tripped breaker.
func newFixture(t *testing.T, attach bool) *apiFixture {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	clk := newFakeClock()
	s := newStore(testLimits(), clk.Now, nil)
	a := newAPI(s, apiOptions{
		TraceURL: "http://tempo.local/trace/{trace_id}", LogsURL: "http://logs.local/search?q={fault_id}",
		BuildInfo: component.BuildInfo{Command: "otelcol-gpu", Version: "1.2.3-test"},
		Logger:    zap.New(core), Telemetry: tb, Now: clk.Now,
	})
	a.setToken(testToken)
	onset := clk.Now().Add(-time.Hour)
	f := console.Fault{ID: "f-xid", Type: "xid_79", Severity: "P1", State: console.StateOpen, Node: "node-b", GPU: "GPU-1234",
		Job: "train", Attempt: 1, Rank: 3, Step: 2, FirstSeen: onset, LastSeen: onset.Add(time.Minute),
		Summary: "GPU fell off the bus", Evidence: map[string]string{"xid": "79"}, TraceID: "0af7651916cd43dd8448eb211c80319c",
		Decision: "acted", Action: "cordon,taint", Reason: "P1 xid"}
	s.RecordFault(f)
	s.RecordFault(console.Fault{ID: "f-old", Type: "ecc_dbe", Severity: "P2", State: console.StateResolved, Node: "node-a",
		Rank: -1, Step: -1, FirstSeen: onset.Add(-time.Hour), LastSeen: onset})
	for st := int64(1); st <= 3; st++ {
		for rank := int64(0); rank < 4; rank++ {
			if rank == 2 && st == 1 {
				continue // a missing cell
			}
			c, v, score := 100*time.Millisecond, "", 0.0
			if rank == 3 && st >= 2 {
				c, v, score = 180*time.Millisecond, "straggler", 5.5
			}
			s.RecordStep(console.Step{Job: "train", Attempt: 1, Step: st, Rank: rank, Node: "node-b", Compute: c, Duration: c + 20*time.Millisecond, Verdict: v, Score: score})
		}
	}
	ctrl := consoletest.New(console.Breaker{Tripped: true, Used: 3, Budget: 3, Window: time.Hour,
		History: []console.BreakerEvent{{Time: onset, Event: "tripped"}}},
		console.QuarantinedNode{Node: "node-b", FaultIDs: []string{"f-xid"}, Actions: []string{"cordon", "taint"}, Reason: "P1 xid", Since: onset})
	if attach {
		s.Attach(ctrl)
	}
	return &apiFixture{api: a, store: s, ctrl: ctrl, tel: tel, logs: logs, clock: clk, onset: onset}
}

type reqOpt func(*http.Request)

func withToken(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

func (f *apiFixture) do(t *testing.T, method, path, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.RemoteAddr = "192.0.2.7:4000"
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	return w
}

// call does an authorized request and decodes the answer into out (nil:
// skip).
func (f *apiFixture) call(t *testing.T, method, path, body string, wantCode int, out any) {
	t.Helper()
	w := f.do(t, method, path, body, withToken(testToken))
	require.Equal(t, wantCode, w.Code, "%s %s: %s", method, path, w.Body.String())
	assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"))
	if out != nil {
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), out), w.Body.String())
	}
}

// wantError checks an error answer's code and that its message contains
// each part.
func (f *apiFixture) wantError(t *testing.T, method, path, body string, code int, parts ...string) {
	t.Helper()
	var e consoleclient.Error
	f.call(t, method, path, body, code, &e)
	for _, p := range parts {
		assert.Contains(t, e.Error, p, "%s %s", method, path)
	}
}

var routes = []struct{ method, path, body string }{
	{"GET", "/api/v1/status", ""},
	{"GET", "/api/v1/faults", ""},
	{"GET", "/api/v1/faults?state=all", ""},
	{"GET", "/api/v1/faults/f-xid", ""},
	{"POST", "/api/v1/faults/f-xid/ack", `{"operator":"alice","reason":"seen"}`},
	{"GET", "/api/v1/nodes", ""},
	{"GET", "/api/v1/nodes/node-b", ""},
	{"POST", "/api/v1/nodes/node-b/release", `{"operator":"alice","reason":"fixed"}`},
	{"GET", "/api/v1/breaker", ""},
	{"POST", "/api/v1/breaker/reset", `{"operator":"alice","reason":"checked"}`},
	{"GET", "/api/v1/jobs", ""},
	{"GET", "/api/v1/jobs/train/heatmap?attempt=1", ""},
	{"GET", "/api/v1/nothing-here", ""},
}

func TestAPIAuthEveryRoute(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			f := newFixture(t, true)
			for name, opts := range map[string][]reqOpt{
				"no token":     nil,
				"wrong token":  {withToken(testToken + "x")},
				"short token":  {withToken("test")},
				"basic scheme": {withHeader("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("a:"+testToken)))},
				"bare token":   {withHeader("Authorization", testToken)},
			} {
				w := f.do(t, rt.method, rt.path, rt.body, opts...)
				require.Equal(t, http.StatusUnauthorized, w.Code, name)
				assert.Contains(t, w.Body.String(), `"error":"missing or wrong bearer token`, name)
				assert.Equal(t, `Bearer realm="faultconsole"`, w.Header().Get("WWW-Authenticate"))
			}
			assert.Empty(t, f.ctrl.Calls(), "a refused request must not reach the controller")
			w := f.do(t, rt.method, rt.path, rt.body, withToken(testToken))
			if rt.path == "/api/v1/nothing-here" {
				assert.Equal(t, http.StatusNotFound, w.Code)
				return
			}
			assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
			// The scheme is case-insensitive.
			w = f.do(t, "GET", "/api/v1/status", "", withHeader("Authorization", "bearer "+testToken))
			assert.Equal(t, http.StatusOK, w.Code)
		})
	}
}

func TestAPIRefusesEverythingBeforeTheTokenIsSet(t *testing.T) {
	s := newStore(testLimits(), nil, nil)
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	a := newAPI(s, apiOptions{Telemetry: tb})
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/v1/status", nil)
	r.Header.Set("Authorization", "Bearer ")
	a.ServeHTTP(w, r)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
}

func TestPageWithoutToken(t *testing.T) {
	f := newFixture(t, true)
	w := f.do(t, "GET", "/", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	body := w.Body.String()
	for _, id := range []string{`id="faults-table"`, `id="breaker-state"`, `id="breaker-reset"`, `id="heatmap"`, `id="token-input"`, `id="nodes-table"`, `id="job-select"`} {
		assert.Contains(t, body, id)
	}
	// No data: none of the store's faults, nodes or jobs.
	for _, secret := range []string{"f-xid", "node-b", "GPU-1234", "fell off the bus", "train", testToken} {
		assert.NotContains(t, body, secret)
	}
	// No external asset: the machines are offline.
	assert.NotRegexp(t, regexp.MustCompile(`(src|href)="(https?:)?//`), body)
	// The CSP allows exactly the page's inline script and style by hash.
	csp := w.Header().Get("Content-Security-Policy")
	assert.NotContains(t, csp, "unsafe-inline")
	m := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindStringSubmatch(body)
	require.NotNil(t, m)
	sum := sha256.Sum256([]byte(m[1]))
	assert.Contains(t, csp, "script-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	assert.Contains(t, csp, "connect-src 'self'")
	assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	// Only GET / is open: another page path needs the token.
	assert.Equal(t, http.StatusUnauthorized, f.do(t, "GET", "/index.html", "").Code)
	assert.Equal(t, http.StatusUnauthorized, f.do(t, "POST", "/", "{}").Code)
}

func TestAPIPostForm(t *testing.T) {
	f := newFixture(t, true)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		w := f.do(t, "POST", "/api/v1/breaker/reset", `{"operator":"a","reason":"b"}`, withToken(testToken), withHeader("Content-Type", ct))
		assert.Equal(t, http.StatusUnsupportedMediaType, w.Code, ct)
		assert.Contains(t, w.Body.String(), "Content-Type must be application/json")
	}
	w := f.do(t, "POST", "/api/v1/breaker/reset", `{"operator":"a","reason":"b"}`, withToken(testToken), withHeader("Content-Type", "application/json; charset=utf-8"))
	assert.Equal(t, http.StatusOK, w.Code)

	big := `{"operator":"a","reason":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	w = f.do(t, "POST", "/api/v1/breaker/reset", big, withToken(testToken))
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Contains(t, w.Body.String(), "larger than 65536 bytes")

	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"reason":"b"}`, 400, "operator is required")
	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"operator":"  ","reason":"b"}`, 400, "operator is required")
	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"operator":"a"}`, 400, "reason is required")
	f.wantError(t, "POST", "/api/v1/nodes/node-b/release", `{"operator":"a"}`, 400, "reason is required")
	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"operator":"a","reason":"b","force":true}`, 400, `unknown field "force"`)
	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"operator":"a","reason":"b"} {}`, 400, "nothing after it")
	f.wantError(t, "POST", "/api/v1/breaker/reset", `not json`, 400, "body must be a JSON object")
	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"operator":"`+strings.Repeat("o", 300)+`","reason":"b"}`, 400, "operator is longer than 256 bytes")
	assert.Len(t, f.ctrl.Calls(), 1, "only the well-formed reset reached the controller")

	refused := sumByAttr(t, f.tel, "otelcol_faultconsole_refused_requests", metadata.TelemetryAttrReason)
	assert.Equal(t, map[string]int64{"content_type": 4, "body_too_large": 1, "bad_body": 8}, refused)
}

func TestAPIStatus(t *testing.T) {
	f := newFixture(t, true)
	var st consoleclient.Status
	f.call(t, "GET", "/api/v1/status", "", 200, &st)
	assert.Equal(t, consoleclient.Status{Version: "1.2.3-test", Command: "otelcol-gpu", Time: f.clock.Now(), ControllerAttached: true,
		OpenFaults: 1, ResolvedFaults: 1, Jobs: 1, TraceLinks: true, LogsLinks: true, Role: "owner", Election: "none"}, st)
	f.store.Detach(f.ctrl)
	st = consoleclient.Status{}
	f.call(t, "GET", "/api/v1/status", "", 200, &st)
	assert.False(t, st.ControllerAttached)
	assert.Empty(t, st.Role, "no controller: no role")
}

func TestAPIFaults(t *testing.T) {
	f := newFixture(t, true)
	var fs consoleclient.Faults
	f.call(t, "GET", "/api/v1/faults", "", 200, &fs)
	require.Len(t, fs.Faults, 1)
	got := fs.Faults[0]
	assert.Equal(t, consoleclient.Fault{ID: "f-xid", Type: "xid_79", Severity: "P1", State: "open", Node: "node-b", GPU: "GPU-1234",
		Job: "train", Attempt: 1, Rank: 3, Step: 2, FirstSeen: f.onset, LastSeen: f.onset.Add(time.Minute),
		Summary: "GPU fell off the bus", Evidence: map[string]string{"xid": "79"}, TraceID: "0af7651916cd43dd8448eb211c80319c",
		Decision: "acted", Action: "cordon,taint", Reason: "P1 xid",
		Links: consoleclient.Links{Trace: "http://tempo.local/trace/0af7651916cd43dd8448eb211c80319c", Logs: "http://logs.local/search?q=f-xid"}}, got)

	f.call(t, "GET", "/api/v1/faults?state=all", "", 200, &fs)
	require.Len(t, fs.Faults, 2)
	assert.Equal(t, []string{"f-xid", "f-old"}, []string{fs.Faults[0].ID, fs.Faults[1].ID}, "newest first")
	assert.Empty(t, fs.Faults[1].Links.Trace, "no trace id, no trace link")
	f.call(t, "GET", "/api/v1/faults?state=open", "", 200, &fs)
	assert.Len(t, fs.Faults, 1)
	f.wantError(t, "GET", "/api/v1/faults?state=closed", "", 400, `state must be open or all, got "closed"`)

	var one consoleclient.Fault
	f.call(t, "GET", "/api/v1/faults/f-old", "", 200, &one)
	assert.Equal(t, "resolved", one.State)
	f.wantError(t, "GET", "/api/v1/faults/nope", "", 404, `fault "nope" is unknown`)
	// An ID with a slash, escaped by the client, is one path segment.
	f.store.RecordFault(console.Fault{ID: "node-1/gpu 0", Type: "t", Severity: "P4", Rank: -1, Step: -1})
	f.call(t, "GET", "/api/v1/faults/node-1%2Fgpu%200", "", 200, &one)
	assert.Equal(t, "node-1/gpu 0", one.ID)
	assert.Equal(t, "http://logs.local/search?q=node-1%2Fgpu%200", one.Links.Logs)

	// An empty list is [], not null.
	w := f.do(t, "GET", "/api/v1/faults", "", withToken(testToken))
	assert.Contains(t, w.Body.String(), `"faults":[`)
}

func TestAPIAck(t *testing.T) {
	f := newFixture(t, true)
	var got consoleclient.Fault
	f.call(t, "POST", "/api/v1/faults/f-xid/ack", `{"operator":"alice","reason":"known bad GPU"}`, 200, &got)
	require.NotNil(t, got.Ack)
	assert.Equal(t, consoleclient.Ack{By: "alice", Remote: "192.0.2.7:4000", Reason: "known bad GPU", Time: f.clock.Now()}, *got.Ack)
	assert.Equal(t, []consoleclient.Fault{got}, func() []consoleclient.Fault {
		var fs consoleclient.Faults
		f.call(t, "GET", "/api/v1/faults", "", 200, &fs)
		return fs.Faults
	}())
	assert.Equal(t, []consoleteestCall{{"Acknowledge", "f-xid", "alice", "known bad GPU"}}, calls(f.ctrl))
	// The reason is optional for an acknowledgement.
	f.call(t, "POST", "/api/v1/faults/f-old/ack", `{"operator":"bob"}`, 200, nil)

	f.wantError(t, "POST", "/api/v1/faults/nope/ack", `{"operator":"alice"}`, 404, `fault "nope" is unknown`)
	f.ctrl.SetErr(errors.New("audit file is read-only"))
	f.wantError(t, "POST", "/api/v1/faults/f-xid/ack", `{"operator":"alice"}`, 502, "audit file is read-only")
	f.store.Detach(f.ctrl)
	f.wantError(t, "POST", "/api/v1/faults/f-xid/ack", `{"operator":"alice"}`, 503, "no remediation exporter is attached")
	assert.Equal(t, 2, f.store.counts().Acknowledged)
}

// consoleteestCall is a recorded call flattened for comparison.
type consoleteestCall struct{ Method, Target, Operator, Reason string }

func calls(c *consoletest.Controller) []consoleteestCall {
	var out []consoleteestCall
	for _, call := range c.Calls() {
		out = append(out, consoleteestCall{call.Method, call.Target, call.Operator.Name, call.Operator.Reason})
	}
	return out
}

func TestAPINodes(t *testing.T) {
	f := newFixture(t, true)
	var ns consoleclient.Nodes
	f.call(t, "GET", "/api/v1/nodes", "", 200, &ns)
	assert.Equal(t, consoleclient.Nodes{Nodes: []consoleclient.Node{{Node: "node-b", FaultIDs: []string{"f-xid"}, Actions: []string{"cordon", "taint"}, Reason: "P1 xid", Since: f.onset}}}, ns)

	f.wantError(t, "POST", "/api/v1/nodes/node-z/release", `{"operator":"alice","reason":"r"}`, 404, `node "node-z" is not quarantined`)
	var rel consoleclient.Release
	f.call(t, "POST", "/api/v1/nodes/node-b/release", `{"operator":"alice","reason":"GPU replaced"}`, 200, &rel)
	assert.Equal(t, consoleclient.Release{Node: "node-b", Detail: "uncordoned node-b and removed its taint"}, rel)
	assert.Equal(t, []consoleteestCall{{"Release", "node-b", "alice", "GPU replaced"}}, calls(f.ctrl))
	f.call(t, "GET", "/api/v1/nodes", "", 200, &ns)
	assert.Empty(t, ns.Nodes)
	w := f.do(t, "GET", "/api/v1/nodes", "", withToken(testToken))
	assert.Contains(t, w.Body.String(), `"nodes":[]`)

	f.ctrl.SetErr(errors.New("kubernetes API: forbidden"))
	f.wantError(t, "GET", "/api/v1/nodes", "", 502, "listing quarantined nodes: kubernetes API: forbidden")
	f.wantError(t, "POST", "/api/v1/nodes/node-b/release", `{"operator":"alice","reason":"r"}`, 502, "kubernetes API: forbidden")
	f.store.Detach(f.ctrl)
	f.wantError(t, "GET", "/api/v1/nodes", "", 503, "no remediation exporter is attached")
	f.wantError(t, "POST", "/api/v1/nodes/node-b/release", `{"operator":"alice","reason":"r"}`, 503, "no remediation exporter")
}

func TestAPIBreaker(t *testing.T) {
	f := newFixture(t, true)
	var b consoleclient.Breaker
	f.call(t, "GET", "/api/v1/breaker", "", 200, &b)
	assert.Equal(t, consoleclient.Breaker{State: "tripped", Tripped: true, Used: 3, Budget: 3, Window: "1h0m0s", WindowSeconds: 3600,
		History: []consoleclient.BreakerEvent{{Time: f.onset, Event: "tripped"}}}, b)

	var rs consoleclient.Reset
	f.call(t, "POST", "/api/v1/breaker/reset", `{"operator":"alice","reason":"node fixed"}`, 200, &rs)
	require.True(t, rs.Reset)
	require.NotNil(t, rs.Breaker)
	assert.Equal(t, "closed", rs.Breaker.State)
	assert.Equal(t, "alice", rs.Breaker.History[1].By)
	assert.Equal(t, []consoleteestCall{{"ResetBreaker", "", "alice", "node fixed"}}, calls(f.ctrl))
	assert.Equal(t, "192.0.2.7:4000", f.ctrl.Calls()[0].Operator.Remote)

	f.ctrl.SetErr(errors.New("configmap conflict"))
	f.wantError(t, "GET", "/api/v1/breaker", "", 502, "reading the breaker: configmap conflict")
	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"operator":"a","reason":"b"}`, 502, "resetting the breaker: configmap conflict")
	f.store.Detach(f.ctrl)
	f.wantError(t, "GET", "/api/v1/breaker", "", 503, "no remediation exporter")
	f.wantError(t, "POST", "/api/v1/breaker/reset", `{"operator":"a","reason":"b"}`, 503, "no remediation exporter")
}

func TestAPIJobsAndHeatmap(t *testing.T) {
	f := newFixture(t, true)
	var js consoleclient.Jobs
	f.call(t, "GET", "/api/v1/jobs", "", 200, &js)
	require.Len(t, js.Jobs, 1)
	assert.Equal(t, consoleclient.Job{Job: "train", Attempt: 1, Ranks: 4, Steps: 3, FirstStep: 1, LastStep: 3, Updated: f.clock.Now(),
		Stragglers: []consoleclient.RankVerdicts{{Rank: 3, Node: "node-b", Steps: 2}}}, js.Jobs[0])

	var h consoleclient.Heatmap
	f.call(t, "GET", "/api/v1/jobs/train/heatmap", "", 200, &h)
	assert.Equal(t, []int64{0, 1, 2, 3}, h.Ranks)
	assert.Equal(t, []int64{1, 2, 3}, h.Steps)
	require.Len(t, h.ComputeMS, 4)
	assert.Nil(t, h.ComputeMS[2][0], "rank 2 step 1 is missing")
	require.NotNil(t, h.ComputeMS[3][2])
	assert.InDelta(t, 180.0, *h.ComputeMS[3][2], 1e-9)
	assert.InDelta(t, 200.0, *h.DurationMS[3][2], 1e-9)
	assert.Equal(t, []consoleclient.Verdict{{Rank: 3, Step: 2, Verdict: "straggler", Score: 5.5}, {Rank: 3, Step: 3, Verdict: "straggler", Score: 5.5}}, h.Verdicts)
	w := f.do(t, "GET", "/api/v1/jobs/train/heatmap?attempt=1", "", withToken(testToken))
	assert.Contains(t, w.Body.String(), `"compute_ms":[[100,100,100],[100,100,100],[null,100,100],[100,180,180]]`)

	f.wantError(t, "GET", "/api/v1/jobs/train/heatmap?attempt=x", "", 400, `attempt must be a non-negative integer, got "x"`)
	f.wantError(t, "GET", "/api/v1/jobs/train/heatmap?attempt=2", "", 404, `job "train" attempt 2 has no heatmap`)
	f.wantError(t, "GET", "/api/v1/jobs/other/heatmap", "", 404, `job "other" has no heatmap`)
}

func TestAPITelemetryAndUnauthorizedLog(t *testing.T) {
	f := newFixture(t, true)
	for range 3 {
		f.do(t, "GET", "/api/v1/faults", "")
	}
	f.call(t, "GET", "/api/v1/faults", "", 200, nil)
	f.call(t, "GET", "/api/v1/faults/x", "", 404, nil)
	f.do(t, "GET", "/", "")

	assert.Equal(t, 1, f.logs.FilterMessageSnippet("refused an API request").Len(), "one warning a minute per remote")
	f.clock.Advance(time.Minute)
	f.do(t, "GET", "/api/v1/faults", "")
	assert.Equal(t, 2, f.logs.FilterMessageSnippet("refused an API request").Len())

	assert.Equal(t, map[string]int64{"/api/v1/faults": 4}, sumByAttr(t, f.tel, "otelcol_faultconsole_unauthorized_requests", metadata.TelemetryAttrRoute))
	byRouteCode := map[string]int64{}
	m, err := f.tel.GetMetric("otelcol_faultconsole_requests")
	require.NoError(t, err)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		route, _ := dp.Attributes.Value(metadata.TelemetryAttrRoute)
		code, _ := dp.Attributes.Value(metadata.TelemetryAttrCode)
		byRouteCode[route.AsString()+" "+strconv.FormatInt(code.AsInt64(), 10)] += dp.Value
	}
	assert.Equal(t, map[string]int64{"/api/v1/faults 401": 4, "/api/v1/faults 200": 1, "/api/v1/faults/{id} 404": 1, "page 200": 1}, byRouteCode)
}

func sumByAttr(t *testing.T, tel *componenttest.Telemetry, name, key string) map[string]int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attributeKey(key))
		out[v.AsString()] += dp.Value
	}
	return out
}

func TestEscape(t *testing.T) {
	assert.Equal(t, "a-b_c.d~9", escape("a-b_c.d~9"))
	assert.Equal(t, "a%26b%3Dc%2F%20", escape("a&b=c/ "))
}

func attributeKey(k string) attribute.Key { return attribute.Key(k) }
