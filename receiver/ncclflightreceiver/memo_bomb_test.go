//go:build unix

package ncclflightreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// The memo bomb (1,000 entries sharing one 1,048,575-item frames
// list through the pickle memo, ~2 MB on disk) dropped into the dump
// directory: refused as over budget, counted and logged with its path,
// while a regular dump beside it is read.
func TestMemoBombDumpIsRefusedWithinBudget(t *testing.T) {
	dir := t.TempDir()
	d := parseFixture(t, "dp4-healthy-v2.7", 0)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_0"), frdumptest.Pickle(d), 0o644))
	bomb := filepath.Join(dir, "nccl_trace_rank_1")
	require.NoError(t, os.WriteFile(bomb, pickletest.MemoBomb(1000, 1<<20-1), 0o644))

	e, tel := startWithTelemetry(t, fastConfig(dir))
	defer e.stop(t)
	require.Eventually(t, func() bool {
		return e.traces.SpanCount() == len(d.Entries) &&
			badInputs(t, tel, semconv.NCCLSourceFlightRecorder, reasonOverBudget) == 1
	}, 60*time.Second, 10*time.Millisecond)
	logged := false
	for _, l := range e.obs.FilterField(zap.String("path", bomb)).All() {
		logged = logged || l.ContextMap()["reason"] == reasonOverBudget
	}
	assert.True(t, logged, "a warning names the bomb and the reason")
	for _, s := range spanRanks(e) {
		assert.Equal(t, int64(0), s, "only the regular dump's spans")
	}
}
