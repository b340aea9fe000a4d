//go:build unix

package inspector

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/safefile"
)

// A followed file replaced by a FIFO that nobody writes: Poll returns (a
// plain open would wait for a writer forever), the old file's lines are
// finished, the FIFO is reported once, and a regular file under the name
// again is read from the start.
func TestFIFOSwappedInDoesNotBlock(t *testing.T) {
	var refused []string
	h := newHarness(t, Options{Refused: func(path string, err error) {
		refused = append(refused, filepath.Base(path)+":"+safefile.Reason(err))
	}})
	h.append(collLines(1, 3))
	h.tailer.Track(h.path)
	assert.Equal(t, []int64{1, 2}, h.poll())

	h.append(collLines(3, 4)) // written, then the name is swapped
	require.NoError(t, os.Rename(h.path, h.path+".old"))
	require.NoError(t, syscall.Mkfifo(h.path, 0o600))
	assert.Equal(t, []int64{3}, h.poll(), "the old file finished")
	assert.Equal(t, []string{"node1-pid42.log:not_regular"}, refused)
	assert.Empty(t, h.poll())
	assert.Len(t, refused, 1, "reported once while it stays a FIFO")
	assert.Equal(t, int64(1), h.tailer.Stats().Refused)

	require.NoError(t, os.Remove(h.path))
	h.append(collLines(10, 11))
	assert.Equal(t, []int64{10}, h.poll())
}

// A symlink to a file outside the directory is never read, tracked before
// or after it became one.
func TestSymlinkIsRefused(t *testing.T) {
	var refused []string
	h := newHarness(t, Options{Refused: func(path string, err error) {
		refused = append(refused, safefile.Reason(err))
	}})
	outside := filepath.Join(t.TempDir(), "secret-pid1.log")
	require.NoError(t, os.WriteFile(outside, []byte(collLines(1, 2)), 0o600))
	require.NoError(t, os.Symlink(outside, h.path))
	h.tailer.Track(h.path)
	assert.Empty(t, h.poll())
	assert.Equal(t, []string{safefile.ReasonSymlink}, refused)

	paths, err := Scan(filepath.Dir(h.path), "")
	require.NoError(t, err)
	assert.Equal(t, []string{h.path}, paths, "Scan lists it so that it is refused, not ignored")
}
