//go:build unix

package sysfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Current names the file a read is blocked in, and is empty between reads.
func TestCurrentNamesTheBlockedFile(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, ClassDir, "mlx5_0")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	fifo := filepath.Join(dev, "hca_type")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	r := NewReader(root)
	assert.Empty(t, r.Current())

	var d Device
	done := make(chan error)
	go func() { done <- r.ReadDevice("mlx5_0", ReadOptions{}, &d) }()
	for r.Current() != fifo {
		time.Sleep(time.Millisecond) // on its way to the FIFO
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteString("MT4123\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, <-done)
	assert.Equal(t, "MT4123", d.HCAType.Value)
	assert.Empty(t, r.Current(), "no read running")
}
