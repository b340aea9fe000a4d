//go:build unix

package watch

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/safefile"
)

type refusals struct {
	mu      sync.Mutex
	reasons map[string][]string // base name -> reasons, one per call
}

func (r *refusals) add(path string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons[filepath.Base(path)] = append(r.reasons[filepath.Base(path)], safefile.Reason(err))
}

func (r *refusals) get() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for k, v := range r.reasons {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// A symlink to a file outside the directory and a FIFO, both under dump
// names: refused once each (not per rescan), never reported as dumps; the
// regular dump beside them is.
func TestRefusesSymlinksAndNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "shadow")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "nccl_trace_rank_1")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "nccl_trace_rank_2"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_0"), []byte("dump0"), 0o644))
	ref := &refusals{reasons: map[string][]string{}}
	c := run(t, Options{Dirs: []string{dir}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: 20 * time.Millisecond, Settle: 20 * time.Millisecond, Refused: ref.add}, nil)

	require.Eventually(t, func() bool { return len(c.paths()) == 1 && len(ref.get()) == 2 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // several rescans
	assert.Equal(t, map[string][]string{"nccl_trace_rank_1": {safefile.ReasonSymlink}, "nccl_trace_rank_2": {safefile.ReasonNotRegular}}, ref.get())
	assert.Equal(t, []string{"nccl_trace_rank_0"}, c.paths())

	// Replaced by a regular file: read; a symlink again: refused again.
	link := filepath.Join(dir, "nccl_trace_rank_1")
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.WriteFile(link, []byte("dump1"), 0o644))
	require.Eventually(t, func() bool { return len(c.paths()) == 2 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(outside, link))
	require.Eventually(t, func() bool { return len(ref.get()["nccl_trace_rank_1"]) == 2 }, 5*time.Second, 10*time.Millisecond)
}

// ReadFile decides on the open descriptor: a symlink or FIFO swapped in
// after the watcher saw a regular file is refused, and the FIFO does not
// block.
func TestReadFileRefusesSwappedInFiles(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "shadow")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o600))
	link := filepath.Join(dir, "nccl_trace_rank_0")
	require.NoError(t, os.Symlink(outside, link))
	_, err := ReadFile(link, 1<<20)
	require.ErrorIs(t, err, safefile.ErrSymlink)
	assert.Contains(t, err.Error(), link)

	fifo := filepath.Join(dir, "nccl_trace_rank_1")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err = ReadFile(fifo, 1<<20)
	require.ErrorIs(t, err, safefile.ErrNotRegular)
}
