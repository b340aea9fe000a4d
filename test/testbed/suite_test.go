//go:build e2e

package testbed

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// TestSuite64Ranks is the detection-quality suite CI runs (make test, with
// the end-to-end tests): every scenario at 64 ranks, once, with a random
// seed it logs. It holds the targets: every injected fault found,
// precision of every type at least 0.95 (with one instance each: no false
// positive), nothing opened on a hard negative, every record well formed.
func TestSuite64Ranks(t *testing.T) {
	opts := DefaultOptions()
	opts.Logger = zaptest.NewLogger(t)
	rep, err := Run(context.Background(), opts)
	require.NoError(t, err)
	var b strings.Builder
	rep.Write(&b)
	t.Logf("seed %d (rerun: go run ./cmd/gpusim -seed %d)\n%s", rep.Seed, rep.Seed, b.String())

	require.Len(t, rep.Scenarios, 31)
	for _, s := range rep.Scenarios {
		if s.HardNegative {
			assert.Empty(t, s.Opened, "hard negative %s opened faults", s.Name)
		}
		for i, d := range s.Found {
			assert.GreaterOrEqual(t, d, 0*d, "%s: expectation %d never opened", s.Name, i)
		}
		// issue 20: found within max_detect_steps of the onset (on arrival),
		// and no more than max_other_faults besides the expected ones
		assert.Empty(t, s.Late, "%s: expectations found after max_detect_steps", s.Name)
		assert.False(t, s.TooManyOthers, "%s: %d faults besides the expected ones", s.Name, s.OtherFaults)
		// issue 30: first_seen on the straggler's own clock, and the
		// processor's job warnings exactly as the scenario says
		assert.Empty(t, s.FirstSeenWrong, "%s: first_seen off the onset by %v", s.Name, s.FirstSeenErrors)
		assert.Empty(t, s.WrongWarnings, "%s: straggler processor warnings", s.Name)
		// issue 22: two jobs dump on the same nodes; a fault of one job
		// attributed to the other would be a false positive there
		if strings.HasPrefix(s.Name, "shared_nodes_") {
			assert.Empty(t, s.FalsePositives, "%s: a fault of the other job on its nodes mixed up with this one's", s.Name)
		}
	}
	for _, tr := range rep.Types {
		assert.GreaterOrEqual(t, tr.Precision(), 0.95, "precision of %s", tr.Type)
		assert.GreaterOrEqual(t, tr.Recall(), 0.95, "recall of %s", tr.Type)
	}
	assert.Empty(t, rep.Unattributed)
	assert.Zero(t, rep.BadRecords)
}
