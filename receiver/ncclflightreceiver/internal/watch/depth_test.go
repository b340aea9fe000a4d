package watch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Depth follows the per-job, per-attempt directories the Slurm prolog
// writes dumps to, including ones created after the start, and no deeper;
// a symlinked directory is not followed (it could lead anywhere).
func TestDepthFollowsJobDirectories(t *testing.T) {
	root := t.TempDir()
	write := func(rel string) {
		t.Helper()
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(rel), 0o644))
	}
	write("nccl_trace_rank_0")               // flat: the agent's job
	write("1001/0/nccl_trace_rank_0")        // job 1001, attempt 0
	write("1001/0/deeper/nccl_trace_rank_9") // below the template: not read
	elsewhere := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "nccl_trace_rank_7"), []byte("x"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "1003"), 0o755))
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(root, "1003", "0")))

	c := run(t, Options{Dirs: []string{root}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: 30 * time.Millisecond, Settle: 40 * time.Millisecond, Depth: 2}, nil)
	rel := func() []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []string
		for _, f := range c.files {
			r, err := filepath.Rel(root, f.Path)
			require.NoError(t, err)
			out = append(out, r)
		}
		slices.Sort(out)
		return out
	}
	require.Eventually(t, func() bool { return len(rel()) == 2 }, 5*time.Second, 10*time.Millisecond)
	write("1002/4/nccl_trace_rank_1") // a job that starts later
	require.Eventually(t, func() bool { return len(rel()) == 3 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, []string{"1001/0/nccl_trace_rank_0", "1002/4/nccl_trace_rank_1", "nccl_trace_rank_0"}, rel())
}

// Without Depth, subdirectories are not followed, as before.
func TestNoDepthReadsOnlyTheDirectory(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "1001", "0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "1001", "0", "nccl_trace_rank_0"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "nccl_trace_rank_1"), []byte("x"), 0o644))
	c := run(t, Options{Dirs: []string{root}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: 30 * time.Millisecond, Settle: 40 * time.Millisecond}, nil)
	require.Eventually(t, func() bool { return len(c.paths()) == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, []string{"nccl_trace_rank_1"}, c.paths())
}
