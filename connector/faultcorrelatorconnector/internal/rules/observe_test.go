package rules

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestConcurrentUse(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			e := fault.Entity{Kind: fault.EntityGPU, Key: string(rune('a' + g))}
			for i := 0; i < 200; i++ {
				ev.Observe(e, sigDBE, float64(i/100), t0.Add(time.Duration(i)*time.Second))
				if i%50 == 0 {
					ev.Evaluate(t0.Add(time.Duration(i) * time.Second))
				}
			}
		}(g)
	}
	wg.Wait()
	ms := ev.Evaluate(t0.Add(200 * time.Second))
	n := 0
	for _, m := range ms {
		if m.Rule == "dbe_alone" {
			n++
		}
	}
	assert.Equal(t, 4, n)
}

// An EntityRef resolves its entity once; after Evaluate forgot the entity
// it looks it up again, so that a sample through an old reference is not
// kept in state nobody evaluates.
func TestEntityRefSurvivesForgetting(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{ForgetAfter: 30 * time.Minute})
	dbe := ev.Signal(sigDBE)
	ref := EntityRef{Entity: gpuG}
	require.True(t, ev.ObserveRef(&ref, dbe, Sample{Signal: sigDBE, Value: 0, At: t0}))
	require.True(t, ev.ObserveRef(&ref, dbe, Sample{Signal: sigDBE, Value: 1, At: t0.Add(10 * time.Second)}))
	_, ok := findRule(ev.Evaluate(t0.Add(20*time.Second)), "dbe_alone")
	assert.True(t, ok, "samples through one reference land in one entity's state")

	ev.Evaluate(t0.Add(31 * time.Minute))
	require.Equal(t, 0, ev.Entities(), "forgotten")
	later := t0.Add(32 * time.Minute)
	require.True(t, ev.ObserveRef(&ref, dbe, Sample{Signal: sigDBE, Value: 1, At: later}))
	require.True(t, ev.ObserveRef(&ref, dbe, Sample{Signal: sigDBE, Value: 2, At: later.Add(time.Second)}))
	assert.Equal(t, 1, ev.Entities(), "the reference found its entity again")
	_, ok = findRule(ev.Evaluate(later.Add(2*time.Second)), "dbe_alone")
	assert.True(t, ok, "and its new samples are evaluated")
}

// A Batch observes as ObserveRef does, under one hold of the lock: only
// for kinds whose rules read the signal, only samples that can change a
// condition (Keeps), and the evaluator is free again once it is closed.
func TestBatchObservesLikeObserveRef(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	dbe, loss := ev.Signal(sigDBE), ev.Signal("training.loss")
	gpu, job := EntityRef{Entity: gpuG}, EntityRef{Entity: fault.Entity{Kind: fault.EntityJob, Key: "j"}}
	finite, nan := Sample{Value: 2.5, At: t0}, Sample{Value: math.NaN(), At: t0}
	assert.False(t, loss.Keeps(&finite), "loss_nan reads only non-finite losses")
	assert.True(t, loss.Keeps(&nan))

	b := ev.Batch()
	assert.False(t, b.ObserveRef(&job, &dbe, &Sample{Value: 1, At: t0}), "no job rule reads the DBE count")
	assert.False(t, b.ObserveRef(&job, &loss, &finite))
	assert.True(t, b.ObserveRef(&job, &loss, &nan))
	require.True(t, b.ObserveRef(&gpu, &dbe, &Sample{Value: 0, At: t0}))
	require.True(t, b.ObserveRef(&gpu, &dbe, &Sample{Value: 1, At: t0.Add(10 * time.Second)}))
	b.Close()

	assert.Equal(t, 2, ev.Entities(), "the lock is free again")
	matches := ev.Evaluate(t0.Add(20 * time.Second))
	for _, rule := range []string{"dbe_alone", "loss_nan"} {
		_, ok := findRule(matches, rule)
		assert.True(t, ok, rule)
	}
}
