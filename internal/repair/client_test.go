package repair

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAgent verifies every request as an agent does and answers with the
// handler's value.
type fakeAgent struct {
	t        *testing.T
	verifier *Verifier
	node     string
	mu       sync.Mutex
	got      []string // method path
	bodies   [][]byte
	answer   func(w http.ResponseWriter, r *http.Request)
}

func (a *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s, err := a.verifier.Verify(r.Method, r.URL.RequestURI(), r.Header, body, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if s.Node != a.node {
		http.Error(w, "not this node", http.StatusForbidden)
		return
	}
	a.mu.Lock()
	a.got = append(a.got, r.Method+" "+r.URL.Path)
	a.bodies = append(a.bodies, body)
	a.mu.Unlock()
	a.answer(w, r)
}

func newFakeAgent(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*fakeAgent, *Client) {
	t.Helper()
	key := testKey(5)
	v, err := NewVerifier([]ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, 0, 0)
	require.NoError(t, err)
	a := &fakeAgent{t: t, verifier: v, node: "node-a", answer: answer}
	srv := httptest.NewTLSServer(a)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	// The node resolves through the template: {node}.localhost would need
	// DNS, so the test maps the host with a custom dialer instead.
	hc := srv.Client()
	tr := hc.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.ServerName = "example.com" // httptest's certificate
	tr.DialContext = func(ctx context.Context, network, _ string) (netConn, error) {
		var d netDialer
		return d.DialContext(ctx, network, u.Host)
	}
	hc = &http.Client{Transport: tr}
	signer, err := NewSigner(key)
	require.NoError(t, err)
	c, err := NewClient(ClientConfig{URLTemplate: "https://{node}:8790", HTTPClient: hc}, signer)
	require.NoError(t, err)
	return a, c
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func TestClientCallsEveryEndpoint(t *testing.T) {
	job := Job{ID: "j1", Node: "node-a", FaultID: "f1", Kind: "gpu_reset", State: JobPending}
	a, c := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case PathNode:
			writeJSON(w, 200, NodeStatus{Node: "node-a", BootID: "b", GPUs: []GPUStatus{{UUID: "GPU-1", Busy: true, Why: "1 process"}}})
		case PathConfirm:
			writeJSON(w, 200, Confirmation{Confirmed: true, Detail: "seen", Evidence: []string{"GPU-1: XID 79 x1"}})
		default:
			writeJSON(w, http.StatusAccepted, job)
		}
	})
	ctx := context.Background()
	st, err := c.NodeStatus(ctx, "node-a")
	require.NoError(t, err)
	assert.Equal(t, "b", st.BootID)
	got, err := c.StartGPUReset(ctx, "node-a", GPUResetRequest{ID: "j1", Node: "node-a", FaultID: "f1", GPUUUID: "GPU-1"})
	require.NoError(t, err)
	assert.Equal(t, job, got)
	_, err = c.StartVerify(ctx, "node-a", VerifyRequest{ID: "j2", Node: "node-a", Checks: []CheckSpec{{Check: CheckDiag, Level: 1}}})
	require.NoError(t, err)
	_, err = c.Job(ctx, "node-a", "j1")
	require.NoError(t, err)
	since := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	conf, err := c.Confirm(ctx, "node-a", ConfirmRequest{ID: "c1", Node: "node-a", FaultID: "f1", FaultType: "gpu.fell_off_bus", GPUUUID: "GPU-1", Since: since})
	require.NoError(t, err)
	assert.Equal(t, Confirmation{Confirmed: true, Detail: "seen", Evidence: []string{"GPU-1: XID 79 x1"}}, conf)
	assert.Equal(t, []string{"GET " + PathNode, "POST " + PathGPUReset, "POST " + PathVerify, "GET " + PathJobs + "j1", "POST " + PathConfirm}, a.got)
	var sentConfirm ConfirmRequest
	require.NoError(t, DecodeStrict(a.bodies[4], &sentConfirm))
	assert.Equal(t, ConfirmRequest{ID: "c1", Node: "node-a", FaultID: "f1", FaultType: "gpu.fell_off_bus", GPUUUID: "GPU-1", Since: since}, sentConfirm)
	var sent GPUResetRequest
	require.NoError(t, DecodeStrict(a.bodies[1], &sent))
	assert.Equal(t, "GPU-1", sent.GPUUUID)

	// The agent refuses another node's request: 403 as a StatusError.
	_, err = c.NodeStatus(ctx, "node-b")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusForbidden, se.Status)
	assert.Equal(t, "node-b", se.Node)
}

func TestClientRefusesBadAnswers(t *testing.T) {
	for name, c := range map[string]struct {
		answer string
		want   error
	}{
		"unknown field": {`{"node":"node-a","boot_id":"b","gpus":[],"extra":1}`, ErrUnknownField},
		"repeated key":  {`{"node":"node-a","boot_id":"b","boot_id":"c","gpus":[]}`, ErrRepeatedKey},
		"trailing":      {`{"node":"node-a","boot_id":"b","gpus":[]} x`, ErrSyntax},
	} {
		_, cl := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, c.answer) })
		_, err := cl.NodeStatus(context.Background(), "node-a")
		assert.ErrorIs(t, err, c.want, name)
	}
	_, cl := newFakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"node":"`+strings.Repeat("a", MaxResponseBytes)+`"}`)
	})
	_, err := cl.NodeStatus(context.Background(), "node-a")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "over")

	// A redirect is not followed.
	_, cl = newFakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere/", http.StatusFound)
	})
	_, err = cl.NodeStatus(context.Background(), "node-a")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusFound, se.Status)
}

func TestClientRefusesBadInput(t *testing.T) {
	signer, err := NewSigner(testKey(5))
	require.NoError(t, err)
	for _, tmpl := range []string{"", "ftp://{node}", "https://agent:8790", "https://{node}:8790/x", "https://{node}{node}", "https://u@{node}", "https://{node}?q"} {
		_, err := NewClient(ClientConfig{URLTemplate: tmpl}, signer)
		assert.Error(t, err, tmpl)
	}
	_, err = NewClient(ClientConfig{URLTemplate: "https://{node}:8790"}, nil)
	assert.Error(t, err)
	c, err := NewClient(ClientConfig{URLTemplate: "https://{node}:8790/"}, signer)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.NodeStatus(ctx, "evil.example/#")
	assert.Error(t, err)
	_, err = c.StartGPUReset(ctx, "node-a", GPUResetRequest{ID: "j", Node: "node-b"})
	assert.Error(t, err, "the body's node must be the node called")
	_, err = c.StartVerify(ctx, "node-a", VerifyRequest{ID: "a/b", Node: "node-a"})
	assert.Error(t, err)
	_, err = c.Job(ctx, "node-a", "../x")
	assert.Error(t, err)
	_, err = c.Confirm(ctx, "node-a", ConfirmRequest{ID: "c", Node: "node-b"})
	assert.Error(t, err, "the body's node must be the node called")
	_, err = c.Confirm(ctx, "node-a", ConfirmRequest{ID: "a b", Node: "node-a"})
	assert.Error(t, err)
	_, err = c.StartVerify(ctx, "node-a", VerifyRequest{ID: "j", Node: "node-a", FaultID: strings.Repeat("f", MaxRequestBytes)})
	assert.Error(t, err, "a body over the agent's bound is not sent")
	assert.False(t, errors.Is(err, context.Canceled))
}

type (
	netConn   = net.Conn
	netDialer = net.Dialer
)
