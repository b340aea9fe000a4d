package sysfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListerSaysWhatChanged(t *testing.T) {
	dir := t.TempDir()
	var l lister
	names, changed, err := l.list(dir)
	require.NoError(t, err)
	assert.True(t, changed, "the first listing is new")
	assert.Empty(t, names)
	_, changed, err = l.list(dir)
	require.NoError(t, err)
	assert.False(t, changed)

	for _, n := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(dir, n), "1\n")
	}
	names, changed, err = l.list(dir)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.ElementsMatch(t, []string{"a", "b", "c"}, names)
	again, changed, err := l.list(dir)
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Equal(t, names, again)
	if runtime.GOOS == "linux" {
		// Only the path's C string (syscall.Open).
		assert.LessOrEqual(t, testing.AllocsPerRun(20, func() { _, _, _ = l.list(dir) }), 1.0, "an unchanged listing allocates no names")
	}

	// One goes (the others may be a prefix of the last listing), one comes.
	last := names[len(names)-1]
	require.NoError(t, os.Remove(filepath.Join(dir, last)))
	names, changed, err = l.list(dir)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Len(t, names, 2)
	assert.NotContains(t, names, last)
	writeFile(t, filepath.Join(dir, "d"), "1\n")
	names, changed, err = l.list(dir)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Len(t, names, 3)
	assert.True(t, slices.Contains(names, "d"))

	_, _, err = l.list(filepath.Join(dir, "nope"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, _, err = l.list(filepath.Join(dir, "a"))
	require.Error(t, err, "a file is not a directory")
}

// Many names: the listing takes more than one buffer of the kernel's.
func TestListerManyNames(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 600 {
		n := filepath.Base(t.Name()) + "_counter_with_a_long_name_" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		writeFile(t, filepath.Join(dir, n), "1\n")
		want = append(want, n)
	}
	var l lister
	names, changed, err := l.list(dir)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.ElementsMatch(t, want, names)
	_, changed, err = l.list(dir)
	require.NoError(t, err)
	assert.False(t, changed)
}
