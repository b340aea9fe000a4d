package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type collected struct {
	mu      sync.Mutex
	files   []File
	batches [][]string // base names, one slice per call of ready
}

func (c *collected) add(files []File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, f := range files {
		c.files = append(c.files, f)
		names = append(names, filepath.Base(f.Path))
	}
	c.batches = append(c.batches, names)
}

func (c *collected) batchList() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]string(nil), c.batches...)
}
func (c *collected) paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, f := range c.files {
		out = append(out, filepath.Base(f.Path))
	}
	return out
}

func run(t *testing.T, opts Options, logger *zap.Logger) *collected {
	t.Helper()
	if logger == nil {
		logger = zap.NewNop()
	}
	w := New(opts, logger)
	c := &collected{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx, c.add); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func TestReportsMatchingCompleteFilesOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_0"), []byte("dump0"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "unrelated.txt"), []byte("x"), 0o644))
	c := run(t, Options{Dirs: []string{dir}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: 50 * time.Millisecond, Settle: 40 * time.Millisecond}, nil)

	require.Eventually(t, func() bool { return len(c.paths()) == 1 }, 5*time.Second, 10*time.Millisecond)
	// A new dump written later (fsnotify), then nothing changes: no repeats.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "host-a_nccl_trace_rank_1"), []byte("dump1"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_1"), []byte("dump1"), 0o644))
	require.Eventually(t, func() bool { return len(c.paths()) == 2 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.ElementsMatch(t, []string{"nccl_trace_rank_0", "nccl_trace_rank_1"}, c.paths())
}

// Dumps that settle together (every rank of a job dumping on the same
// timeout) are reported in one call, in path order, so that the receiver
// analyzes the directory once and saves its state once.
func TestFilesThatSettleTogetherComeInOneCall(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"nccl_trace_rank_2", "nccl_trace_rank_0", "nccl_trace_rank_3", "nccl_trace_rank_1"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644))
	}
	c := run(t, Options{Dirs: []string{dir}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: time.Hour, Settle: 40 * time.Millisecond}, nil)

	require.Eventually(t, func() bool { return len(c.paths()) == 4 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, [][]string{{"nccl_trace_rank_0", "nccl_trace_rank_1", "nccl_trace_rank_2", "nccl_trace_rank_3"}}, c.batchList())
}

// A file still being written is reported only once it stops growing, with
// its final size.
func TestWaitsForAFileToSettle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nccl_trace_rank_3")
	f, err := os.Create(path)
	require.NoError(t, err)
	c := run(t, Options{Dirs: []string{dir}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: 20 * time.Millisecond, Settle: 150 * time.Millisecond}, nil)
	for i := 0; i < 10; i++ {
		_, err := f.WriteString("chunk-")
		require.NoError(t, err)
		time.Sleep(30 * time.Millisecond)
	}
	require.NoError(t, f.Close())
	require.Eventually(t, func() bool { return len(c.paths()) == 1 }, 5*time.Second, 10*time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Equal(t, int64(60), c.files[0].Size, "reported with its final size")
}

// A dump rewritten in place is a new version with a new key.
func TestRewrittenFileIsReportedAgain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nccl_trace_rank_0")
	require.NoError(t, os.WriteFile(path, []byte("v1"), 0o644))
	c := run(t, Options{Dirs: []string{dir}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: 20 * time.Millisecond, Settle: 40 * time.Millisecond}, nil)
	require.Eventually(t, func() bool { return len(c.paths()) == 1 }, 5*time.Second, 10*time.Millisecond)
	tmp := filepath.Join(dir, ".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte("version 2"), 0o644))
	require.NoError(t, os.Rename(tmp, path)) // renamed into place
	require.Eventually(t, func() bool { return len(c.paths()) == 2 }, 5*time.Second, 10*time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.NotEqual(t, c.files[0].Key(), c.files[1].Key())
	assert.Equal(t, int64(9), c.files[1].Size)
}

// A directory that is missing, appears, and disappears again: logged once
// per change, and the watcher keeps going.
func TestDirectoryComesAndGoes(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "torch-fr")
	core, logs := observer.New(zap.InfoLevel)
	c := run(t, Options{Dirs: []string{dir}, Patterns: []string{"nccl_trace_rank_*"}, Rescan: 20 * time.Millisecond, Settle: 30 * time.Millisecond}, zap.New(core))
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("cannot list directory").Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 1, logs.FilterMessageSnippet("cannot list directory").Len(), "logged once, not per rescan")

	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_0"), []byte("d"), 0o644))
	require.Eventually(t, func() bool { return len(c.paths()) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, os.RemoveAll(dir))
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("cannot list directory").Len() == 2 }, 5*time.Second, 10*time.Millisecond)
}

func TestReadFileCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(path, make([]byte, 100), 0o644))
	_, err := ReadFile(path, 99)
	assert.True(t, errors.Is(err, ErrTooLarge))
	data, err := ReadFile(path, 100)
	require.NoError(t, err)
	assert.Len(t, data, 100)
	assert.Equal(t, "/x|1|2|3", File{Path: "/x", Inode: 1, Size: 2, ModTime: time.Unix(0, 3)}.Key())
}
