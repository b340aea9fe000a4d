package faultconsoleextension

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// Issue 30: a job whose step records cannot show a straggler says so in
// the job list and the heatmap; the newest step's word counts, a late
// older step's does not.
func TestJobWithoutCommSplit(t *testing.T) {
	f := newFixture(t, true)
	blind := func(st int64, on bool) {
		for rank := range int64(2) {
			s := step("blind", 0, st, rank, 100*time.Millisecond, "")
			s.NoCommSplit = on
			f.store.RecordStep(s)
		}
	}
	blind(1, false)
	blind(2, true)
	blind(1, false) // a late span of an older step: not the job's newest word

	var js consoleclient.Jobs
	f.call(t, "GET", "/api/v1/jobs", "", 200, &js)
	byJob := map[string]consoleclient.Job{}
	for _, j := range js.Jobs {
		byJob[j.Job] = j
	}
	require.Contains(t, byJob, "blind")
	assert.True(t, byJob["blind"].NoCommSplit)
	assert.False(t, byJob["train"].NoCommSplit, "the fixture's job splits the wait")
	var h consoleclient.Heatmap
	f.call(t, "GET", "/api/v1/jobs/blind/heatmap", "", 200, &h)
	assert.True(t, h.NoCommSplit)
	w := f.do(t, "GET", "/api/v1/jobs/train/heatmap", "", withToken(testToken))
	assert.Contains(t, w.Body.String(), `"no_comm_split":false`, "always in the JSON")

	blind(3, false) // a record split the wait: the note goes
	f.call(t, "GET", "/api/v1/jobs/blind/heatmap", "", 200, &h)
	assert.False(t, h.NoCommSplit)
}

// The page shows the note from the heatmap's no_comm_split (the browser
// test, test/e2e/console_browser_test.go, sees it drawn).
func TestPageHasTheCommSplitNote(t *testing.T) {
	f := newFixture(t, true)
	w := f.do(t, "GET", "/", "")
	body := w.Body.String()
	assert.Contains(t, body, `id="job-comm-note"`)
	assert.Contains(t, body, `showCommNote(h.no_comm_split === true)`)
	assert.Contains(t, body, "cannot show a straggler")
}
