//go:build unix

package safefile

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dump")
	require.NoError(t, os.WriteFile(path, []byte("hello"), 0o600))
	f, info, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, int64(5), info.Size())
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
}

func TestOpenRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("x"), 0o600))
	link := filepath.Join(dir, "dump")
	require.NoError(t, os.Symlink(outside, link))
	_, _, err := Open(link)
	require.ErrorIs(t, err, ErrSymlink)
	assert.Equal(t, ReasonSymlink, Reason(err))
	assert.Contains(t, err.Error(), link)

	loop := filepath.Join(dir, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	_, _, err = Open(loop)
	require.ErrorIs(t, err, ErrSymlink)
}

// A FIFO nobody writes: a plain open would wait for a writer forever.
func TestOpenRefusesFIFOWithoutBlocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	_, _, err := Open(path)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.Equal(t, ReasonNotRegular, Reason(err))
	assert.Contains(t, err.Error(), "FIFO")
	assert.Contains(t, err.Error(), path)
}

func TestOpenRefusesDirectoryAndSocket(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Open(dir)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.Contains(t, err.Error(), "directory")

	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	_, _, err = Open(sock)
	require.Error(t, err) // ENXIO at open on Linux, or refused after fstat
	assert.Contains(t, err.Error(), sock)
}

func TestOpenMissing(t *testing.T) {
	_, _, err := Open(filepath.Join(t.TempDir(), "none"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Empty(t, Reason(err))
	assert.Empty(t, Reason(errors.New("other")))
}

func TestCheck(t *testing.T) {
	require.NoError(t, Check("f", 0o644))
	assert.ErrorIs(t, Check("l", fs.ModeSymlink|0o777), ErrSymlink)
	assert.ErrorIs(t, Check("p", fs.ModeNamedPipe), ErrNotRegular)
	assert.ErrorIs(t, Check("d", fs.ModeDir), ErrNotRegular)
	assert.ErrorIs(t, Check("c", fs.ModeDevice|fs.ModeCharDevice), ErrNotRegular)
}
