package ncclflightreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// copyIncident copies the real dumps of an incident (testdata/real) into a
// directory of their own, as an operator copies them: the files' times are
// the copy's, a year after the incident.
func copyIncident(t *testing.T, incident string) string {
	t.Helper()
	dir := t.TempDir()
	for r := range frdumptest.MoEWorld {
		name := frdumptest.MoEFileName(r)
		raw, err := os.ReadFile(filepath.Join("testdata", "real", "nvrx-megatron-moe", incident, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), raw, 0o644))
	}
	return dir
}

// The real incidents through the receiver: one finding, the hang, whose
// ranks are the reference's culprits; the correlator opens one fault per
// rank in nccl.ranks and quotes that rank's stuck collective (evidence
// rank.<r>.stuck_collective), which names the process group, the op, its
// sizes and dtype.
func TestRealIncidentsOneHangRecord(t *testing.T) {
	for _, tc := range []struct {
		incident string
		culprits []int
		pg, desc string
		stuck    string
	}{
		{"gpu_error_1st", []int{12}, "74", "EXPERT_MODEL_PARALLEL_GROUP", "pg 74:EXPERT_MODEL_PARALLEL_GROUP seq 20537 nccl:all_to_all 4027x5120 BFloat16"},
		{"lock_gil_1st", []int{9, 14}, "72", "EXPERT_MODEL_PARALLEL_GROUP", "pg 72:EXPERT_MODEL_PARALLEL_GROUP seq 45265 nccl:all_to_all 2048x5120 BFloat16"},
	} {
		got := readAll(t, copyIncident(t, tc.incident))
		require.Len(t, got, 1, tc.incident)
		h := got[0]
		assert.Equal(t, string(analysis.KindHang), attrStr(h, semconv.AttrNCCLFinding), tc.incident)
		ranks, ok := h.Attributes().Get(semconv.AttrNCCLRanks)
		require.True(t, ok)
		want := make([]any, len(tc.culprits))
		for i, r := range tc.culprits {
			want[i] = int64(r)
		}
		assert.Equal(t, want, ranks.Slice().AsRaw(), tc.incident)
		assert.Equal(t, tc.pg, attrStr(h, semconv.AttrNCCLPGName), tc.incident)
		assert.Equal(t, tc.desc, attrStr(h, semconv.AttrNCCLPGDesc), tc.incident)
		assert.Equal(t, "all_to_all", attrStr(h, semconv.AttrNCCLCollective), tc.incident)
		assert.Contains(t, h.Body().Str(), tc.stuck, tc.incident)
		ev, ok := h.Attributes().Get(semconv.AttrNCCLEvidence)
		require.True(t, ok)
		for _, r := range tc.culprits {
			st, ok := ev.Map().Get("rank." + strconv.Itoa(r) + "." + semconv.NCCLEvidenceStuckCollective)
			require.True(t, ok, "%s rank %d", tc.incident, r)
			assert.Contains(t, st.Str(), tc.stuck, "%s rank %d: its fault names the group and the collective first", tc.incident, r)
		}
	}
}
