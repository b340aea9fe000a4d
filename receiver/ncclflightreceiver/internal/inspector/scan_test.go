package inspector

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScan(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"node-b-pid7.log", "node-a-pid12.log", "notes.txt", "node-a-pid12.log.1", "x.log"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub-pid1.log"), 0o700))

	got, err := Scan(dir, "")
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "node-a-pid12.log"), filepath.Join(dir, "node-b-pid7.log")}, got)

	got, err = Scan(dir, "*.txt")
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "notes.txt")}, got)

	got, err = Scan(filepath.Join(dir, "missing"), "")
	require.NoError(t, err)
	assert.Empty(t, got)

	_, err = Scan(dir, "[")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `inspector file pattern "["`)
}
