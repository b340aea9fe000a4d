package gpurepairreceiver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

func TestJobsBoundedOldestFinishedEvicted(t *testing.T) {
	var mu sync.Mutex
	var finished []string
	js := newJobs(2, time.Now, func(j repair.Job) {
		mu.Lock()
		finished = append(finished, j.ID)
		mu.Unlock()
	})
	defer func() { require.NoError(t, js.stop(context.Background())) }()
	done := func(context.Context, *jobTracker) (repair.JobState, string, []repair.CheckResult) {
		return repair.JobPassed, "", nil
	}
	block := make(chan struct{})
	blocked := func(ctx context.Context, _ *jobTracker) (repair.JobState, string, []repair.CheckResult) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return repair.JobPassed, "", nil
	}
	_, _, err := js.start("a", "n", "f", kindVerify, "ka", nil, done)
	require.NoError(t, err)
	waitFinal(t, js, "a")
	_, _, err = js.start("b", "n", "f", kindVerify, "kb", []string{"g1"}, blocked)
	require.NoError(t, err)
	_, created, err := js.start("c", "n", "f", kindVerify, "kc", []string{"g2"}, blocked)
	require.NoError(t, err)
	assert.True(t, created)
	_, ok := js.get("a")
	assert.False(t, ok, "the oldest finished job made room")
	_, _, err = js.start("d", "n", "f", kindVerify, "kd", nil, done)
	assert.ErrorIs(t, err, errTooManyJobs, "every job held is unfinished")
	close(block)
	waitFinal(t, js, "b")
	waitFinal(t, js, "c")
	_, _, err = js.start("d", "n", "f", kindVerify, "kd", nil, done)
	require.NoError(t, err)
	waitFinal(t, js, "d")
	require.NoError(t, js.stop(context.Background()))
	_, _, err = js.start("e", "n", "f", kindVerify, "ke", nil, done)
	assert.ErrorIs(t, err, errStopped)
	mu.Lock()
	assert.ElementsMatch(t, []string{"a", "b", "c", "d"}, finished)
	mu.Unlock()
}

func waitFinal(t *testing.T, js *jobs, id string) {
	t.Helper()
	for {
		j, ok := js.get(id)
		require.True(t, ok)
		if j.State.Final() {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A copy handed out does not change with the job.
func TestJobCopies(t *testing.T) {
	j := repair.Job{Results: []repair.CheckResult{{Check: "x", Tests: []repair.TestResult{{Name: "a"}}}}}
	c := copyJob(j)
	c.Results[0].Tests[0].Name = "b"
	c.Results[0].Check = "y"
	assert.Equal(t, "a", j.Results[0].Tests[0].Name)
	assert.Equal(t, "x", j.Results[0].Check)
}
