package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestSignalResolvesOnce(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	unread := ev.Signal("no.rule.reads.this")
	assert.False(t, unread.Read())
	assert.False(t, unread.ReadBy(fault.EntityGPU))
	assert.False(t, ev.ObserveSignal(gpuG, unread, Sample{Signal: "no.rule.reads.this", Value: 1, At: t0}))

	dbe := ev.Signal(sigDBE)
	assert.True(t, dbe.Read())
	assert.True(t, dbe.ReadBy(fault.EntityGPU))
	assert.True(t, dbe.ReadBy(fault.EntityNode), "dbe_with_oom_and_nccl_timeout reads it on nodes")
	assert.False(t, dbe.ReadBy(fault.EntityJob))
	assert.False(t, ev.ObserveSignal(fault.Entity{Kind: fault.EntityJob, Key: "j"}, dbe, Sample{Value: 1, At: t0}))
	assert.Equal(t, 0, ev.Entities())

	// The resolved signal stands for the name: Sample.Signal is not read.
	require.True(t, ev.ObserveSignal(gpuG, dbe, Sample{Value: 0, At: t0}))
	require.True(t, ev.ObserveSignal(gpuG, dbe, Sample{Value: 1, At: t0.Add(10 * time.Second)}))
	_, ok := findRule(ev.Evaluate(t0.Add(20*time.Second)), "dbe_alone")
	assert.True(t, ok)
}
