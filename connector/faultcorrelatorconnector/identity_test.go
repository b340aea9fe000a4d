package faultcorrelatorconnector

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestRememberCoarseAndRepeatedIdentities(t *testing.T) {
	c, _, _ := newTestCorrelator(t, nil)
	node := fault.Entity{Kind: fault.EntityNode, Key: testHost}
	job := fault.Entity{Kind: fault.EntityJob, Key: testJob}
	rank := fault.Entity{Kind: fault.EntityRank, Key: testJob + "/0"}
	for r := int64(0); r < 3; r++ {
		w := where{host: testHost, gpu: "GPU-" + strconv.FormatInt(r, 10), job: testJob, rank: r, rankKnown: true}
		c.remember(node, w)
		c.remember(job, w)
	}
	assert.Equal(t, where{host: testHost}, c.info[node], "a node carries no GPU, job or rank")
	assert.Equal(t, where{job: testJob}, c.info[job], "a job carries no host, GPU or rank")

	// A verdict span without the GPU keeps the one the step spans named,
	// also when it repeats; a changed identity after a repeat is stored.
	step := where{host: testHost, gpu: "GPU-0", job: testJob, rankKnown: true}
	c.remember(rank, step)
	for i := 0; i < 2; i++ {
		c.remember(rank, where{job: testJob, rankKnown: true})
		assert.Equal(t, step, c.info[rank])
	}
	moved := where{host: "xl009", gpu: "GPU-9", job: testJob, rankKnown: true}
	c.remember(rank, moved)
	assert.Equal(t, moved, c.info[rank])
	c.remember(rank, step)
	assert.Equal(t, step, c.info[rank], "the identity before the last one is not mistaken for a repeat")
}

// A GPU's fault record names the job and rank its spans named, even when
// the GPU's metrics (which name neither) arrived last; a new job's span
// replaces them.
func TestGPUKeepsTheJobItsSpansNamed(t *testing.T) {
	c, _, _ := newTestCorrelator(t, nil)
	gpu := fault.Entity{Kind: fault.EntityGPU, Key: "GPU-6"}
	span := where{host: testHost, gpu: "GPU-6", job: testJob, rank: 22, rankKnown: true}
	c.remember(gpu, span)
	c.remember(gpu, where{host: testHost, gpu: "GPU-6"}) // a scrape
	assert.Equal(t, span, c.info[gpu])
	next := where{host: testHost, gpu: "GPU-6", job: "job-2", rank: 3, rankKnown: true}
	c.remember(gpu, next)
	c.remember(gpu, where{host: testHost, gpu: "GPU-6"})
	assert.Equal(t, next, c.info[gpu])
}

// Identities live for one to two generations after they were last
// remembered: a gateway that saw max_entities ranks of finished jobs still
// learns where the ranks of a new job run.
func TestIdentitiesOfSilentEntitiesAreForgotten(t *testing.T) {
	c, _, _ := newTestCorrelator(t, func(cfg *Config) { cfg.Mode = ModeGateway; cfg.MaxEntities = 4 })
	rank := func(job string, r int64) (fault.Entity, where) {
		return fault.Entity{Kind: fault.EntityRank, Key: rankKey(job, r)},
			where{host: testHost, gpu: "GPU-" + strconv.FormatInt(r, 10), job: job, rank: r, rankKnown: true}
	}
	known := func(job string, r int64) bool {
		e, _ := rank(job, r)
		_, ok := c.identity(e)
		return ok
	}
	c.step(t0)
	for r := int64(0); r < 4; r++ {
		c.remember(rank("old-job", r))
	}
	c.remember(rank("new-job", 0))
	assert.False(t, known("new-job", 0), "max_entities identities held")

	c.step(t0.Add(identityGeneration))
	c.remember(rank("new-job", 0))
	c.remember(rank("old-job", 0)) // still running
	assert.True(t, known("new-job", 0), "a new generation has room")
	old3, _ := rank("old-job", 3)
	assert.Contains(t, c.infoOld, old3, "the last generation is still known") // (a lookup would move it)

	c.step(t0.Add(2 * identityGeneration))
	assert.True(t, known("new-job", 0))
	assert.True(t, known("old-job", 0))
	for r := int64(1); r < 4; r++ {
		assert.False(t, known("old-job", r), "rank %d silent for a whole generation", r)
	}
	gpu, w := rank("new-job", 0)
	got, _ := c.identity(gpu)
	assert.Equal(t, w, got)

	// A node's or a job's record still names it once its identity is gone.
	node := c.record(rules.Match{Entity: fault.Entity{Kind: fault.EntityNode, Key: "xl999"}}, t0)
	assert.Equal(t, "xl999", node.HostName)
	job := c.record(rules.Match{Entity: fault.Entity{Kind: fault.EntityJob, Key: "gone-job"}}, t0)
	assert.Equal(t, "gone-job", job.JobID)
}
