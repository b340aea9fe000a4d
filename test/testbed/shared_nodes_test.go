package testbed

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// Issue 22: the agents read each job's dumps from <dir>/<job>/<attempt>/,
// with no job id of their own, and two jobs can share the nodes (and so the
// dump directory) of one agent.
func TestSharedNodesLayOutDumpsPerJob(t *testing.T) {
	c, err := NewCluster(Options{Scenarios: []string{"shared_nodes_fr_hang", "shared_nodes_fr_straggler"}, Dir: t.TempDir()})
	require.NoError(t, err)
	defer c.Close()
	require.Len(t, c.jobs, 2)
	hang, straggler := c.jobs[0], c.jobs[1]
	require.Equal(t, "shared_nodes_fr_straggler", straggler.sc.Name)
	for n, nd := range straggler.nodes {
		host := hang.nodes[n]
		assert.Equal(t, filepath.Join(host.frRoot, straggler.id, "0"), nd.frDir, "node %d dumps below the shared node's directory", n)
		assert.Equal(t, filepath.Join(host.frRoot, hang.id, "0"), host.frDir)
		assert.DirExists(t, nd.frDir)
		entries, err := os.ReadDir(nd.frRoot)
		require.NoError(t, err)
		assert.Empty(t, entries, "the sharing job's own node directory stays empty")
	}

	// The agents' receivers watch the roots and set no job id; the
	// agents' environment has none either.
	text, err := pipelineConfig(c.opts, c.jobs, c.pageURL, "127.0.0.1:1")
	require.NoError(t, err)
	var cfg struct {
		Receivers map[string]map[string]any `yaml:"receivers"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(text), &cfg))
	fr := cfg.Receivers["ncclflight/"+hang.nodes[7].host]
	require.NotNil(t, fr)
	assert.NotContains(t, fr, "job_id")
	assert.Equal(t, []any{hang.nodes[7].frRoot}, fr["flight_recorder"].(map[string]any)["directories"])
	for _, n := range c.Nodes() {
		env, err := n.AgentEnv("127.0.0.1:9092", t.TempDir(), AgentAddrs{Telemetry: "127.0.0.1:8888"}, true)
		require.NoError(t, err)
		for _, kv := range env {
			assert.NotRegexp(t, `^TRAINING_JOB_ID=`, kv)
		}
		assert.Contains(t, env, "NCCL_FR_DIR="+n.FRDir)
	}
}

func TestShareNodesWithInvalid(t *testing.T) {
	head := "defaults: {nodes: 2, gpus_per_node: 8, steps: 10}\nscenarios:\n" +
		"  - {name: a, inject: {kind: hang, at_step: 2}, expect: [{type: nccl.hang, entity: job}]}\n"
	for want, doc := range map[string]string{
		`share_nodes_with: itself`:           head + "  - {name: b, share_nodes_with: b, inject: {kind: hang, at_step: 2}, expect: [{type: nccl.hang, entity: job}]}\n",
		`share_nodes_with: no scenario "zz"`: head + "  - {name: b, share_nodes_with: zz, inject: {kind: hang, at_step: 2}, expect: [{type: nccl.hang, entity: job}]}\n",
		`"a" has 2 nodes, not 3`:             head + "  - {name: b, nodes: 3, share_nodes_with: a, inject: {kind: hang, at_step: 2}, expect: [{type: nccl.hang, entity: job}]}\n",
		`"b" shares another's nodes itself`: head + "  - {name: b, share_nodes_with: a, inject: {kind: hang, at_step: 2}, expect: [{type: nccl.hang, entity: job}]}\n" +
			"  - {name: c, share_nodes_with: b, inject: {kind: hang, at_step: 2}, expect: [{type: nccl.hang, entity: job}]}\n",
	} {
		_, err := parseScenarios([]byte(doc))
		assert.ErrorContains(t, err, want)
	}
}
