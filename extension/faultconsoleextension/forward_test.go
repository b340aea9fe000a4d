package faultconsoleextension

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// replica is one gateway's console, started over HTTPS on 127.0.0.1 with
// a recording controller.
type replica struct {
	name string
	url  string
	ext  *faultConsole
	ctrl *consoletest.Controller
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
	pool *x509.CertPool
}

// replicaOpts: token is the console's (default testToken); forwardCA,
// when set, turns forward on, verifying the owner against that file.
type replicaOpts struct {
	token     string
	forwardCA string
	plain     bool
}

func startReplica(t *testing.T, name string, o replicaOpts) *replica {
	t.Helper()
	if o.token == "" {
		o.token = testToken
	}
	cfg := testConfig(t)
	cfg.TokenFile = writeToken(t, o.token)
	var pool *x509.CertPool
	if !o.plain {
		var certFile, keyFile string
		certFile, keyFile, pool = selfSigned(t)
		cfg.TLS = &configtls.ServerConfig{Config: configtls.Config{CertFile: certFile, KeyFile: keyFile}}
	}
	if o.forwardCA != "" {
		cfg.Forward = ForwardConfig{Enabled: true, Timeout: 10 * time.Second,
			TLS: configtls.ClientConfig{Config: configtls.Config{CAFile: o.forwardCA}}}
	}
	require.NoError(t, cfg.Validate())
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	set := nopSettings()
	set.TelemetrySettings = tel.NewTelemetrySettings()
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	ext, err := newExtension(cfg, set)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	ctrl := consoletest.New(console.Breaker{Tripped: true, Used: 3, Budget: 3, Window: time.Hour},
		console.QuarantinedNode{Node: "node-b", FaultIDs: []string{"f-xid"}, Actions: []string{"cordon"}, Since: time.Now()})
	ext.Attach(ctrl)
	scheme := "https"
	if o.plain {
		scheme = "http"
	}
	return &replica{name: name, url: scheme + "://" + ext.Addr(), ext: ext, ctrl: ctrl, tel: tel, logs: logs, pool: pool}
}

func (r *replica) member() ownership.Member { return ownership.Member{Name: r.name, Console: r.url} }

// owns makes r the owner; standbyOf makes r a standby naming owner.
func (r *replica) owns() {
	r.ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleOwner, Self: r.member(), Owner: r.member()}})
}

func (r *replica) standbyOf(owner ownership.Member) {
	r.ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleStandby, Self: r.member(), Owner: owner}})
}

// post sends a control to r's console as a client would, with token.
func (r *replica) post(t *testing.T, path, body, token string) (*http.Response, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, r.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

// counter sums a counter of r's telemetry by attribute key (0 points: empty).
func (r *replica) counter(t *testing.T, name, key string) map[string]int64 {
	t.Helper()
	m, err := r.tel.GetMetric(name)
	if err != nil {
		return map[string]int64{}
	}
	out := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attributeKey(key))
		out[v.String()] += dp.Value
	}
	return out
}

// caFile is the file a standby trusts for r: its self-signed certificate.
func (r *replica) caFile(t *testing.T) string {
	t.Helper()
	return r.ext.cfg.TLS.CertFile
}

// A standby forwards release, breaker reset and acknowledge to the owner
// over verified TLS: the owner performs each exactly once, with the
// operator and the standby named; the standby's controller is never
// called; the owner's answer is relayed with the owner's name; reads stay
// on the standby.
func TestForwardToOwner(t *testing.T) {
	owner := startReplica(t, "gw-0", replicaOpts{})
	owner.owns()
	owner.ext.RecordFault(console.Fault{ID: "f-xid", Type: "xid_79", Severity: "P1", Node: "node-b", Rank: -1, Step: -1,
		FirstSeen: time.Now(), LastSeen: time.Now()})
	standby := startReplica(t, "gw-1", replicaOpts{forwardCA: owner.caFile(t)})
	standby.standbyOf(owner.member())
	standby.ext.RecordStep(console.Step{Job: "train", Attempt: 1, Step: 1, Rank: 0, Node: "node-a", Compute: time.Millisecond, Duration: time.Millisecond})

	for _, c := range controls {
		resp, body := standby.post(t, c.path, c.body, testToken)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.path, body)
		assert.Equal(t, "gw-0", resp.Header.Get(consoleclient.HeaderForwardedTo), c.path)
		assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
		if strings.HasSuffix(c.path, "/release") {
			var rel consoleclient.Release
			require.NoError(t, json.Unmarshal(body, &rel))
			assert.Equal(t, consoleclient.Release{Node: "node-b", Detail: "uncordoned node-b and removed its taint"}, rel, "the owner's answer, relayed")
		}
	}
	calls := owner.ctrl.Calls()
	require.Len(t, calls, 3, "each control performed once, by the owner")
	for i, want := range []string{"Release", "ResetBreaker", "Acknowledge"} {
		assert.Equal(t, want, calls[i].Method)
		op := calls[i].Operator
		assert.Equal(t, "alice", op.Name)
		assert.Equal(t, "gw-1", op.Via, "the owner knows it came through the standby")
		host, _, err := net.SplitHostPort(op.ForwardedFor)
		require.NoError(t, err, op.ForwardedFor)
		assert.Equal(t, "127.0.0.1", host, "the caller's address as the standby saw it")
		assert.NotEqual(t, op.ForwardedFor, op.Remote, "Remote is the standby's connection")
	}
	assert.Empty(t, standby.ctrl.Calls(), "the standby acts on nothing")
	assert.Equal(t, map[string]int64{"/api/v1/nodes/{node}/release": 1, "/api/v1/breaker/reset": 1, "/api/v1/faults/{id}/ack": 1},
		standby.counter(t, "otelcol_faultconsole_forwarded_requests", metadata.TelemetryAttrRoute))
	assert.Equal(t, map[string]int64{"200": 3}, standby.counter(t, "otelcol_faultconsole_forwarded_requests", metadata.TelemetryAttrCode))
	assert.Equal(t, 3, standby.logs.FilterMessage("faultconsole: control forwarded to the owner").Len())
	assert.Equal(t, 1, owner.logs.FilterMessage("faultconsole: node released").FilterField(zap.String("via", "gw-1")).Len())

	// Reads are the standby's own: its heatmap, its status.
	c := &consoleclient.Client{BaseURL: standby.url, Token: testToken,
		HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: standby.pool, MinVersion: tls.VersionTLS12}}}}
	defer c.HTTP.CloseIdleConnections()
	hm, _, err := c.Heatmap(context.Background(), "train", 1)
	require.NoError(t, err, "the heatmap lives on the standby")
	assert.Equal(t, []int64{0}, hm.Ranks)
	st, _, err := c.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "standby", st.Role)
	assert.True(t, st.ForwardsControls)

	// A refusal of the owner is relayed as it answered it.
	resp, body := standby.post(t, "/api/v1/nodes/node-z/release", `{"operator":"alice","reason":"x"}`, testToken)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, string(body))
	assert.Contains(t, string(body), `node \"node-z\" is not quarantined`)
	resp, body = standby.post(t, "/api/v1/breaker/reset", `{"operator":"alice"}`, testToken)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	assert.Contains(t, string(body), "reason is required", "the owner validates the body")
	assert.Len(t, owner.ctrl.Calls(), 3)
}

// The owner checks the caller's token itself: a standby whose token
// differs from the owner's forwards the control with the caller's, and
// the owner's 401 comes back; nothing acts. A caller without the
// standby's token is refused by the standby and nothing is forwarded.
func TestForwardTokenCheckedByOwner(t *testing.T) {
	const ownerToken = "owner-only-token-0123456789"
	owner := startReplica(t, "gw-0", replicaOpts{token: ownerToken})
	owner.owns()
	standby := startReplica(t, "gw-1", replicaOpts{forwardCA: owner.caFile(t)})
	standby.standbyOf(owner.member())

	resp, body := standby.post(t, controls[0].path, controls[0].body, testToken)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(body))
	assert.Equal(t, `Bearer realm="faultconsole"`, resp.Header.Get("WWW-Authenticate"))
	assert.Contains(t, string(body), "missing or wrong bearer token")
	assert.Equal(t, map[string]int64{"/api/v1/nodes/{node}/release": 1}, owner.counter(t, "otelcol_faultconsole_unauthorized_requests", metadata.TelemetryAttrRoute))

	resp, _ = standby.post(t, controls[0].path, controls[0].body, ownerToken)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the standby checks its own token first")
	assert.Equal(t, map[string]int64{"401": 1}, standby.counter(t, "otelcol_faultconsole_forwarded_requests", metadata.TelemetryAttrCode), "only the first was forwarded")
	assert.Empty(t, owner.ctrl.Calls())
	assert.Empty(t, standby.ctrl.Calls())
}

// A forwarded control is never forwarded again: two replicas that each
// believe the other owns (a stale view) answer 409 after one hop, and
// nothing acts.
func TestForwardLoopRefused(t *testing.T) {
	a := startReplica(t, "gw-a", replicaOpts{})
	b := startReplica(t, "gw-b", replicaOpts{forwardCA: a.caFile(t)})
	// a forwards to b, b would forward to a.
	a.ext.cfg.Forward = ForwardConfig{Enabled: true, Timeout: 10 * time.Second,
		TLS: configtls.ClientConfig{Config: configtls.Config{CAFile: b.caFile(t)}}}
	fwd, err := newForwarder(context.Background(), a.ext.cfg.Forward)
	require.NoError(t, err)
	a.ext.api.fwd = fwd
	a.standbyOf(b.member())
	b.standbyOf(a.member())

	resp, body := a.post(t, controls[1].path, controls[1].body, testToken)
	assert.Equal(t, http.StatusConflict, resp.StatusCode, string(body))
	var e consoleclient.Error
	require.NoError(t, json.Unmarshal(body, &e))
	assert.Equal(t, `gw-b received a control forwarded by "gw-a" but does not own gpu_faults either (standby): a forwarded control is never forwarded again; gw-a owns gpu_faults`, e.Error)
	assert.Equal(t, "gw-b", resp.Header.Get(consoleclient.HeaderForwardedTo))
	assert.Equal(t, map[string]int64{"forward_loop": 1}, b.counter(t, "otelcol_faultconsole_refused_requests", metadata.TelemetryAttrReason))
	assert.Empty(t, b.counter(t, "otelcol_faultconsole_forwarded_requests", metadata.TelemetryAttrCode), "b forwarded nothing")
	assert.Equal(t, map[string]int64{"409": 1}, a.counter(t, "otelcol_faultconsole_forwarded_requests", metadata.TelemetryAttrCode))
	assert.Empty(t, a.ctrl.Calls())
	assert.Empty(t, b.ctrl.Calls())
}

// While the owner is unknown the standby answers 503 saying why, counted
// as owner_unknown, and connects to nothing.
func TestForwardOwnerUnknown(t *testing.T) {
	owner := startReplica(t, "gw-0", replicaOpts{})
	standby := startReplica(t, "gw-1", replicaOpts{forwardCA: owner.caFile(t)})
	for _, tc := range []struct {
		role ownership.Status
		want string
	}{
		{ownership.Status{Role: ownership.RoleElecting, Self: standby.member()},
			"gw-1 does not own gpu_faults and the election of its owner is in progress: the control cannot be forwarded yet; try again in a few seconds"},
		{ownership.Status{Role: ownership.RoleStandby, Self: standby.member()},
			"gw-1 is a standby and does not know which replica owns gpu_faults (its group leader named none): the control cannot be forwarded; try again in a few seconds"},
		{ownership.Status{Role: ownership.RoleStandby, Self: standby.member(), Owner: ownership.Member{Name: "gw-0"}},
			"gw-1 is a standby: gw-0 owns gpu_faults but advertises no console URL (its gpu_faults receiver's console_url), so the control cannot be forwarded; send it to the owner's console"},
	} {
		standby.ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: tc.role})
		resp, body := standby.post(t, controls[0].path, controls[0].body, testToken)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
		var e consoleclient.Error
		require.NoError(t, json.Unmarshal(body, &e))
		assert.Equal(t, tc.want, e.Error)
		assert.Equal(t, string(tc.role.Role), e.Role)
	}
	assert.Equal(t, map[string]int64{"owner_unknown": 3}, standby.counter(t, "otelcol_faultconsole_refused_requests", metadata.TelemetryAttrReason))
	assert.Empty(t, owner.counter(t, "otelcol_faultconsole_requests", metadata.TelemetryAttrCode), "nothing reached the owner")
	assert.Empty(t, standby.ctrl.Calls())
}

// The owner's certificate is verified against forward's CA: an owner
// signed by another CA is not sent the token (502, counted); an owner
// advertising plain http off loopback is not dialled; one on loopback is.
func TestForwardTLS(t *testing.T) {
	owner := startReplica(t, "gw-0", replicaOpts{})
	owner.owns()
	otherCA, _, _ := selfSigned(t)
	standby := startReplica(t, "gw-1", replicaOpts{forwardCA: otherCA})
	standby.standbyOf(owner.member())
	resp, body := standby.post(t, controls[0].path, controls[0].body, testToken)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, string(body))
	assert.Contains(t, string(body), "gw-1 is a standby and forwarded the control to the owner gw-0 ("+owner.url+"), which did not answer")
	assert.Contains(t, string(body), "certificate signed by unknown authority")
	assert.Empty(t, owner.counter(t, "otelcol_faultconsole_requests", metadata.TelemetryAttrCode), "no request reached the owner")

	standby.standbyOf(ownership.Member{Name: "gw-0", Console: "http://gw-0.gw.ns.svc:8787"})
	resp, body = standby.post(t, controls[0].path, controls[0].body, testToken)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, string(body))
	var e consoleclient.Error
	require.NoError(t, json.Unmarshal(body, &e))
	assert.Equal(t, `gw-1 is a standby: gw-0 owns gpu_faults but advertises a plain-HTTP console URL "http://gw-0.gw.ns.svc:8787" off loopback: a control is forwarded with its bearer token over HTTPS only`, e.Error)
	assert.Equal(t, map[string]int64{"forward_failed": 2}, standby.counter(t, "otelcol_faultconsole_refused_requests", metadata.TelemetryAttrReason))

	plain := startReplica(t, "gw-2", replicaOpts{plain: true})
	plain.owns()
	standby.standbyOf(plain.member())
	resp, body = standby.post(t, controls[1].path, controls[1].body, testToken)
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Len(t, plain.ctrl.Calls(), 1, "plain http on loopback")
	assert.Empty(t, owner.ctrl.Calls())
}

// The standby bounds the body before forwarding it (413, nothing sent),
// and the owner refuses forwarding headers that are not a name and an
// address.
func TestForwardBounds(t *testing.T) {
	owner := startReplica(t, "gw-0", replicaOpts{})
	owner.owns()
	standby := startReplica(t, "gw-1", replicaOpts{forwardCA: owner.caFile(t)})
	standby.standbyOf(owner.member())
	big := `{"operator":"alice","reason":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	resp, body := standby.post(t, controls[1].path, big, testToken)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(body))
	assert.Empty(t, owner.counter(t, "otelcol_faultconsole_requests", metadata.TelemetryAttrCode))

	f := newFixture(t, true)
	w := f.do(t, "POST", controls[1].path, controls[1].body, withToken(testToken), withHeader(consoleclient.HeaderForwardedBy, "gw 1"))
	assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "Otelcol-Gpu-Forwarded-By must be a replica's name")
	w = f.do(t, "POST", controls[1].path, controls[1].body, withToken(testToken), withHeader(consoleclient.HeaderForwardedBy, "gw-1"),
		withHeader(consoleclient.HeaderForwardedFor, strings.Repeat("1", 300)))
	assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Equal(t, map[string]int64{"bad_forward": 2}, sumByAttr(t, f.tel, "otelcol_faultconsole_refused_requests", metadata.TelemetryAttrReason))
	assert.Empty(t, f.ctrl.Calls())
}

func TestForwardURL(t *testing.T) {
	u := mustURL(t, "/api/v1/nodes/a%2Fb/release?x=1")
	got, err := forwardURL("https://gw-0.gw.ns.svc:8787/", u)
	require.NoError(t, err)
	assert.Equal(t, "https://gw-0.gw.ns.svc:8787/api/v1/nodes/a%2Fb/release?x=1", got, "path and query as received")
	for _, bad := range []string{"ftp://gw-0:21", "https://user:pw@gw-0:8787", "https:///x", "http://10.0.0.5:8787", "https://gw-0:8787?q=1", "://"} {
		_, err := forwardURL(bad, u)
		assert.Error(t, err, bad)
	}
	got, err = forwardURL("http://[::1]:8787", u)
	require.NoError(t, err, "plain http on loopback")
	assert.Equal(t, "http://[::1]:8787/api/v1/nodes/a%2Fb/release?x=1", got)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.ParseRequestURI(s)
	require.NoError(t, err)
	return u
}
