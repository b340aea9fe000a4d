package gpurepairreceiver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

func resetBody(id, node, gpu string) []byte {
	b, _ := json.Marshal(repair.GPUResetRequest{ID: id, Node: node, FaultID: "f-1", GPUUUID: gpu})
	return b
}

// Every refusal of docs/security.md ("Repair actions (agent side)"): the
// status, the count by reason, one log line per reason, and no reset.
func TestRequestsRefused(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	body := resetBody("j1", testNode, gpu0)
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		reason string
	}{
		{"unsigned", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, "http://"+e.addr+repair.PathGPUReset, strings.NewReader(string(body)))
			return r
		}, http.StatusUnauthorized, metadata.ReasonMalformed},
		{"wrong key", func() *http.Request {
			return e.signed(testKey(9), http.MethodPost, repair.PathGPUReset, testNode, "r-wrongkey", body, now)
		}, http.StatusUnauthorized, metadata.ReasonBadSignature},
		{"tampered body", func() *http.Request {
			r := e.signed(e.key, http.MethodPost, repair.PathGPUReset, testNode, "r-tamper", body, now)
			other := resetBody("j1", testNode, gpu1)
			r.Body, r.ContentLength = http.NoBody, int64(len(other))
			r.Body = readCloser(other)
			return r
		}, http.StatusUnauthorized, metadata.ReasonBadSignature},
		{"stale", func() *http.Request {
			return e.signed(e.key, http.MethodPost, repair.PathGPUReset, testNode, "r-stale", body, now.Add(-6*time.Minute))
		}, http.StatusUnauthorized, metadata.ReasonStale},
		{"another node's request", func() *http.Request {
			return e.signed(e.key, http.MethodPost, repair.PathGPUReset, "node-b", "r-node", resetBody("j1", "node-b", gpu0), now)
		}, http.StatusForbidden, metadata.ReasonWrongNode},
		{"body for another node", func() *http.Request {
			return e.signed(e.key, http.MethodPost, repair.PathGPUReset, testNode, "r-bodynode", resetBody("j1", "node-b", gpu0), now)
		}, http.StatusForbidden, metadata.ReasonWrongNode},
		{"oversized body", func() *http.Request {
			big := []byte(`{"id":"j1","node":"node-a","fault_id":"` + strings.Repeat("x", repair.MaxRequestBytes) + `","gpu_uuid":"g"}`)
			return e.signed(e.key, http.MethodPost, repair.PathGPUReset, testNode, "r-big", big, now)
		}, http.StatusRequestEntityTooLarge, metadata.ReasonTooLarge},
		{"repeated key", func() *http.Request {
			b := []byte(`{"id":"j1","node":"node-a","fault_id":"f","gpu_uuid":"` + gpu1 + `","gpu_uuid":"` + gpu0 + `"}`)
			return e.signed(e.key, http.MethodPost, repair.PathGPUReset, testNode, "r-rep", b, now)
		}, http.StatusBadRequest, metadata.ReasonRepeatedKey},
		{"repeated key in a check", func() *http.Request {
			b := []byte(`{"id":"j2","node":"node-a","fault_id":"f","checks":[{"check":"dcgm_diag","level":1,"level":3}]}`)
			return e.signed(e.key, http.MethodPost, repair.PathVerify, testNode, "r-rep2", b, now)
		}, http.StatusBadRequest, metadata.ReasonRepeatedKey},
		{"unknown field", func() *http.Request {
			b := []byte(`{"id":"j1","node":"node-a","fault_id":"f","gpu_uuid":"g","force":true}`)
			return e.signed(e.key, http.MethodPost, repair.PathGPUReset, testNode, "r-unk", b, now)
		}, http.StatusBadRequest, metadata.ReasonBadBody},
		{"bad job id", func() *http.Request {
			return e.signed(e.key, http.MethodPost, repair.PathGPUReset, testNode, "r-badid", resetBody("../x", testNode, gpu0), now)
		}, http.StatusBadRequest, metadata.ReasonBadBody},
		{"unknown path", func() *http.Request {
			return e.signed(e.key, http.MethodGet, "/v1/repair/reboot", testNode, "r-path", nil, now)
		}, http.StatusNotFound, metadata.ReasonNotFound},
		{"wrong method", func() *http.Request {
			return e.signed(e.key, http.MethodGet, repair.PathGPUReset, testNode, "r-method", nil, now)
		}, http.StatusMethodNotAllowed, metadata.ReasonNotFound},
	}
	want := map[string]int64{}
	for _, c := range cases {
		status, msg := e.raw(c.req())
		assert.Equal(t, c.status, status, "%s: %s", c.name, msg)
		want[c.reason]++
	}

	// A replay of an accepted request.
	ok := e.signed(e.key, http.MethodGet, repair.PathNode, testNode, "r-once", nil, now)
	status, msg := e.raw(ok)
	require.Equal(t, http.StatusOK, status, msg)
	replay := e.signed(e.key, http.MethodGet, repair.PathNode, testNode, "r-once", nil, now)
	status, _ = e.raw(replay)
	assert.Equal(t, http.StatusUnauthorized, status, "replay")
	want[metadata.ReasonReplay]++

	assert.Equal(t, want, e.refused())
	assert.Zero(t, e.devices.resetCount(), "nothing refused reached the GPU")
	_, err := e.client.Job(context.Background(), testNode, "j1")
	assert.Equal(t, http.StatusNotFound, statusOf(err), "no refused request made a job")

	// Logged once per reason.
	perReason := map[string]int{}
	for _, l := range e.logs.FilterMessageSnippet("request refused").All() {
		perReason[l.ContextMap()["reason"].(string)]++
	}
	for reason := range want {
		assert.Equal(t, 1, perReason[reason], reason)
	}
}

func TestNodeStatus(t *testing.T) {
	d := newFakeDevices()
	d.procs = map[string][]int{gpu0: {4242}} // gpu1 has no answer: unknown
	e := newEnv(t, withDevices(d))
	st, err := e.client.NodeStatus(context.Background(), testNode)
	require.NoError(t, err)
	assert.Equal(t, repair.NodeStatus{Node: testNode, BootID: testBoot, GPUs: []repair.GPUStatus{
		{UUID: gpu0, Index: 0, Busy: true, Why: "1 process (pid 4242)"},
		{UUID: gpu1, Index: 1, Busy: true, Why: "process list has no answer for the GPU"},
	}}, st)

	d.set(func(f *fakeDevices) { f.procs = map[string][]int{gpu0: {}, gpu1: {}} })
	st, err = e.client.NodeStatus(context.Background(), testNode)
	require.NoError(t, err)
	assert.False(t, st.GPUs[0].Busy || st.GPUs[1].Busy)

	// No inventory: refused, not answered with no GPUs.
	d.set(func(f *fakeDevices) { f.invErr = errNVML })
	_, err = e.client.NodeStatus(context.Background(), testNode)
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(err))
}

func TestNodeStatusWithoutBootID(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) { c.ProcRoot = t.TempDir() }))
	_, err := e.client.NodeStatus(context.Background(), testNode)
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(err), "an unreadable boot id must not look like a reboot")
}

// At most MaxInFlight requests are read at once: the next is refused 503
// before its body is read, and a freed slot serves again. Bounds what many
// senders at once cost the agent (16 × 64 KiB), signed or not.
func TestRequestsInFlightBounded(t *testing.T) {
	e := newEnv(t)
	for range MaxInFlight {
		e.rcv.api.inFlight <- struct{}{} // MaxInFlight requests being read
	}
	status, text := e.raw(e.signed(e.key, http.MethodGet, repair.PathNode, testNode, "r-overload", nil, time.Now()))
	assert.Equal(t, http.StatusServiceUnavailable, status, text)
	assert.Contains(t, text, "requests at once")

	<-e.rcv.api.inFlight
	status, text = e.raw(e.signed(e.key, http.MethodGet, repair.PathNode, testNode, "r-after", nil, time.Now()))
	assert.NotEqual(t, http.StatusServiceUnavailable, status, "a freed slot serves: %s", text)
	for range MaxInFlight - 1 {
		<-e.rcv.api.inFlight
	}
}
