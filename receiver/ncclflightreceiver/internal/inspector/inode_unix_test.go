//go:build unix

package inspector

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInodeOf(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, nil, 0o600))
	require.NoError(t, os.WriteFile(b, nil, 0o600))
	ia, err := os.Stat(a)
	require.NoError(t, err)
	ib, err := os.Stat(b)
	require.NoError(t, err)
	assert.NotZero(t, inodeOf(ia))
	assert.NotEqual(t, inodeOf(ia), inodeOf(ib))

	require.NoError(t, os.Rename(a, filepath.Join(dir, "c")))
	ic, err := os.Stat(filepath.Join(dir, "c"))
	require.NoError(t, err)
	assert.Equal(t, inodeOf(ia), inodeOf(ic), "a rename keeps the inode")
}
