package slurm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// fakeSlurmrestd answers the documented slurmrestd paths for one API
// version with the shapes of v0.0.40 (state as a list, times as objects),
// and rejects requests without the JWT headers.
type fakeSlurmrestd struct {
	t       *testing.T
	version string
	mu      sync.Mutex
	nodes   map[string]map[string]any
	posts   []map[string]any
}

func (f *fakeSlurmrestd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-SLURM-USER-TOKEN") != "jwt-secret" || r.Header.Get("X-SLURM-USER-NAME") != "slurm" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, "Authentication failure")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	base := "/slurm/" + f.version
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	notFound := map[string]any{"errors": []any{map[string]any{"error": "Invalid node name specified", "error_number": 2018}}, "nodes": []any{}}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == base+"/nodes":
		list := []any{}
		for _, n := range f.nodes {
			list = append(list, n)
		}
		writeJSON(200, map[string]any{"nodes": list, "errors": []any{}})
	case r.Method == http.MethodGet && r.URL.Path == base+"/reservations":
		writeJSON(200, map[string]any{"reservations": []any{map[string]any{
			"name": "maint", "node_list": "gpu-node[3-4]", "flags": []string{"MAINT", "SPEC_NODES"},
			"start_time": map[string]any{"set": true, "infinite": false, "number": time.Now().Add(-time.Hour).Unix()},
			"end_time":   map[string]any{"set": true, "infinite": false, "number": time.Now().Add(time.Hour).Unix()},
		}}})
	case len(r.URL.Path) > len(base+"/node/") && r.URL.Path[:len(base+"/node/")] == base+"/node/":
		name := r.URL.Path[len(base+"/node/"):]
		n, ok := f.nodes[name]
		if !ok {
			writeJSON(500, notFound)
			return
		}
		if r.Method == http.MethodGet {
			writeJSON(200, map[string]any{"nodes": []any{n}, "errors": []any{}})
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			writeJSON(405, map[string]any{"errors": []any{map[string]any{"error": "method"}}})
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeJSON(400, map[string]any{"errors": []any{map[string]any{"error": err.Error()}}})
			return
		}
		f.posts = append(f.posts, body)
		states, _ := body["state"].([]any)
		if len(states) != 1 {
			writeJSON(400, map[string]any{"errors": []any{map[string]any{"error": "state must be a list of one flag"}}})
			return
		}
		switch states[0] {
		case "DRAIN":
			n["state"] = []string{"IDLE", "DRAIN"}
			n["reason"] = body["reason"]
			n["reason_changed_at"] = map[string]any{"set": true, "number": time.Now().Unix()}
		case "RESUME":
			n["state"] = []string{"IDLE"}
			n["reason"] = ""
		}
		writeJSON(200, map[string]any{"errors": []any{}})
	default:
		writeJSON(404, map[string]any{"errors": []any{map[string]any{"error": "Unable to find path"}}})
	}
}

func TestRestTransportAgainstDocumentedAPI(t *testing.T) {
	fake := &fakeSlurmrestd{t: t, version: "v0.0.40", nodes: map[string]map[string]any{
		"gpu-node1": {"name": "gpu-node1", "state": []string{"IDLE"}, "gres": "gpu:h100:8(S:0-1)"},
		"gpu-node2": {"name": "gpu-node2", "state": []string{"IDLE", "DRAIN"}, "reason": "bad fan", "reason_changed_at": map[string]any{"set": true, "number": 1700000000}, "gres": "gpu:8"},
		"gpu-node3": {"name": "gpu-node3", "state": []string{"IDLE"}, "gres": "gpu:8"},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	cfg := NewDefaultConfig()
	cfg.Slurmrestd = RestConfig{URL: srv.URL, Token: "jwt-secret", User: "slurm", APIVersion: "v0.0.40"}
	p, err := New(cfg, zaptest.NewLogger(t))
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	res, err := p.Quarantine(ctx, actuator.Request{Node: "gpu-node1", FaultID: "a07573c9c14f1fae", FaultType: "gpu.ecc.dbe", Actions: []actuator.Action{actuator.ActionDrain}})
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome, res.Detail)
	require.Len(t, fake.posts, 1)
	assert.Equal(t, map[string]any{"state": []any{"DRAIN"}, "reason": "otelcol-gpu: gpu.ecc.dbe a07573c9c14f1fae"}, fake.posts[0])

	res, err = p.Quarantine(ctx, actuator.Request{Node: "gpu-node1", FaultID: "a07573c9c14f1fae", FaultType: "gpu.ecc.dbe"})
	require.NoError(t, err)
	assert.Equal(t, actuator.AlreadyDone, res.Outcome)

	res, err = p.Quarantine(ctx, actuator.Request{Node: "gpu-node2", FaultID: "b", FaultType: "gpu.ecc.dbe"})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipForeign, res.Outcome)

	res, err = p.Quarantine(ctx, actuator.Request{Node: "gpu-node3", FaultID: "c", FaultType: "gpu.ecc.dbe"})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome)

	res, err = p.Quarantine(ctx, actuator.Request{Node: "gpu-node9", FaultID: "d", FaultType: "gpu.ecc.dbe"})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNotFound, res.Outcome)

	res, err = p.Release(ctx, actuator.Request{Node: "gpu-node2", FaultID: "b"})
	require.NoError(t, err)
	assert.Equal(t, actuator.NotOurs, res.Outcome)

	res, err = p.Release(ctx, actuator.Request{Node: "gpu-node1", FaultID: "a07573c9c14f1fae"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Applied, res.Outcome)
	require.Len(t, fake.posts, 2)
	assert.Equal(t, map[string]any{"state": []any{"RESUME"}}, fake.posts[1])

	// Breaker recount over REST: node1 resumed, so nothing of ours counts.
	ok, err := p.Breaker().Admit(ctx, "gpu-node1", time.Now())
	require.NoError(t, err)
	assert.True(t, ok)

	// Without the JWT the server refuses and the error says so.
	cfg.Slurmrestd.Token = "wrong"
	bad, err := New(cfg, zaptest.NewLogger(t))
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Quarantine(ctx, actuator.Request{Node: "gpu-node1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTP 401")
}

func TestRestNodeShapes(t *testing.T) {
	// v0.0.38 (Slurm 22.05) as captured from the real slurmrestd.
	var v38 restNodes
	require.NoError(t, json.Unmarshal([]byte(`{"nodes":[{"name":"gpu-node1","state":"idle","state_flags":["DRAIN"],"reason":"otelcol-gpu: x y","reason_changed_at":1795957378}]}`), &v38))
	n := v38.Nodes[0].info()
	assert.Equal(t, []string{"IDLE", "DRAIN"}, n.States)
	assert.Equal(t, time.Unix(1795957378, 0), n.ReasonTime)
	// v0.0.40+.
	var v40 restNodes
	require.NoError(t, json.Unmarshal([]byte(`{"nodes":[{"name":"n","state":["DOWN","DRAIN","NOT_RESPONDING"],"reason":"r","reason_changed_at":{"set":true,"infinite":false,"number":5}}]}`), &v40))
	n = v40.Nodes[0].info()
	assert.Equal(t, []string{"DOWN", "DRAIN", "NOT_RESPONDING"}, n.States)
	assert.Equal(t, time.Unix(5, 0), n.ReasonTime)
	var bad restNodes
	assert.Error(t, json.Unmarshal([]byte(`{"nodes":[{"state":{"x":1}}]}`), &bad))
}
