package slurm

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

func TestGresGPUs(t *testing.T) {
	for gres, want := range map[string]int{
		"":                        0,
		"(null)":                  0,
		"gpu":                     1,
		"gpu:8":                   8,
		"gpu:0":                   0,
		"gpu:h100:8":              8,
		"gpu:h100:4(S:0-1)":       4,
		"gpu:a100:2(S:0,1),nic:1": 2,
		"gpu:a100:2,gpu:v100:2":   4,
		"nic:2":                   0,
		"gpu:h100":                1,
		"mps:100,gpu:4(S:0)":      4,
		"gpu_fake:8":              0,
		"gpu:a100:1(S:0),mps:100": 1,
	} {
		assert.Equal(t, want, gresGPUs(gres), gres)
	}
}

func TestParseNodeLineGres(t *testing.T) {
	nodes := parseNodeLines(nodeLineIdle + "\n" + nodeLineDrained)
	require.Len(t, nodes, 2)
	assert.Equal(t, "(null)", nodes[0].Gres)
}

// fakeTransport answers from a fixed node list.
type fakeTransport struct {
	transport
	list []nodeInfo
	err  error
}

func (f *fakeTransport) node(_ context.Context, name string) (nodeInfo, error) {
	for _, n := range f.list {
		if n.Name == name {
			return n, nil
		}
	}
	return nodeInfo{}, errNodeNotFound
}

func (f *fakeTransport) nodes(context.Context) ([]nodeInfo, error) { return f.list, f.err }

func (f *fakeTransport) reservations(context.Context) ([]reservation, error) { return nil, nil }

func TestCheck(t *testing.T) {
	ft := &fakeTransport{list: []nodeInfo{
		{Name: "gpu1", States: []string{"IDLE"}, Gres: "gpu:8"},
		{Name: "gpu2", States: []string{"IDLE", "DRAIN"}, Gres: "gpu:8", Reason: "otelcol-gpu: gpu.memory.dbe f1"},
		{Name: "gpu3", States: []string{"IDLE", "DRAIN"}, Gres: "gpu:8", Reason: "admin: fan"},
		{Name: "login1", States: []string{"IDLE"}, Gres: "(null)"},
	}}
	p := newPlatform(NewDefaultConfig(), ft, nil)
	ctx := context.Background()
	for node, want := range map[string]actuator.Eligibility{
		"gpu1":   {GPUNodes: 3, Quarantined: 1},
		"gpu2":   {Ours: true, GPUNodes: 3, Quarantined: 1},
		"gpu3":   {Skip: actuator.SkipForeign, Detail: `gpu3 is IDLE+DRAIN by someone else: "admin: fan"`},
		"login1": {Skip: actuator.SkipNoGPU, Detail: "login1 has no GPU: no gpu GRES (Gres=(null))"},
		"ghost":  {Skip: actuator.SkipNotFound, Detail: "no Slurm node ghost"},
		"a b":    {Skip: actuator.SkipNotFound, Detail: `not a Slurm node name: "a b"`},
	} {
		got, err := p.Check(ctx, actuator.Request{Node: node})
		require.NoError(t, err, node)
		assert.Equal(t, want, got, node)
	}
	// Quarantine asks the same.
	res, err := p.Quarantine(ctx, actuator.Request{Node: "login1", FaultID: "f2", Actions: []actuator.Action{actuator.ActionDrain}})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNoGPU, res.Outcome)

	// The counts cannot be read: an error, not an answer.
	ft.err = errors.New("slurmctld down")
	_, err = p.Check(ctx, actuator.Request{Node: "gpu1"})
	assert.ErrorContains(t, err, "slurmctld down")
}

// Over slurmrestd the GRES comes from the node's "gres" field.
func TestRestCheckReadsGres(t *testing.T) {
	fake := &fakeSlurmrestd{t: t, version: "v0.0.40", nodes: map[string]map[string]any{
		"gpu-node1": {"name": "gpu-node1", "state": []string{"IDLE"}, "gres": "gpu:h100:8(S:0-1)"},
		"login1":    {"name": "login1", "state": []string{"IDLE"}, "gres": ""},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cfg := NewDefaultConfig()
	cfg.Slurmrestd = RestConfig{URL: srv.URL, Token: "jwt-secret", User: "slurm", APIVersion: "v0.0.40"}
	p, err := New(cfg, zaptest.NewLogger(t))
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()

	got, err := p.Check(ctx, actuator.Request{Node: "gpu-node1"})
	require.NoError(t, err)
	assert.Equal(t, actuator.Eligibility{GPUNodes: 1}, got)
	got, err = p.Check(ctx, actuator.Request{Node: "login1"})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNoGPU, got.Skip, got.Detail)
	got, err = p.Check(ctx, actuator.Request{Node: "gpu-node9"})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipNotFound, got.Skip, got.Detail)
	assert.Empty(t, fake.posts, "Check writes nothing")
}
