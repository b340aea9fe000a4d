package loadtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildRoCETree(t *testing.T) {
	root := t.TempDir()
	fixture := filepath.Join("..", "..", "receiver", "ibreceiver", "testdata", "procfs-sys", "class", "infiniband", "mlx5_0")
	require.NoError(t, BuildRoCETree(fixture, root, 4))
	devs, err := os.ReadDir(filepath.Join(root, "class", "infiniband"))
	require.NoError(t, err)
	require.Len(t, devs, 4)
	for _, d := range devs {
		b, err := os.ReadFile(filepath.Join(root, "class", "infiniband", d.Name(), "ports", "1", "link_layer"))
		require.NoError(t, err)
		assert.Equal(t, "Ethernet\n", string(b), d.Name())
		_, err = os.Stat(filepath.Join(root, "class", "infiniband", d.Name(), "ports", "1", "hw_counters", "out_of_sequence"))
		assert.NoError(t, err)
	}
}

// The shipped agent configuration has an ib receiver block, read as is.
func TestShippedIBBlock(t *testing.T) {
	ib, err := shippedIBBlock(filepath.Join("..", "..", "distributions", "agent", "config.yaml"))
	require.NoError(t, err)
	assert.Contains(t, ib["collection_interval"], "IB_COLLECTION_INTERVAL")
	assert.Contains(t, ib["sysfs_root"], "SYSFS_ROOT")
	_, err = shippedIBBlock(filepath.Join("..", "..", "distributions", "gateway", "config.yaml"))
	require.Error(t, err)
}

var sink uint64

// ThreadsCPU counts this process's time in nanoseconds: it grows with
// the CPU that some work burns (tens of milliseconds).
func TestThreadsCPU(t *testing.T) {
	c0, err := ThreadsCPU(os.Getpid())
	require.NoError(t, err)
	x := uint64(1)
	for i := range 50_000_000 {
		x = x*6364136223846793005 + uint64(i)
	}
	sink = x
	c1, err := ThreadsCPU(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, c1-c0, time.Millisecond)
}

func TestIBSidePerScrape(t *testing.T) {
	s := IBSide{CPU: 2 * time.Second, Wall: 60 * time.Second, IdleCPU: 30 * time.Millisecond, Idle: 30 * time.Second, Scrapes: 600}
	// 2 s less the idle rate (1 ms/s) over 60 s, over 600 scrapes.
	assert.Equal(t, (2*time.Second-60*time.Millisecond)/600, s.PerScrape())
	assert.Zero(t, IBSide{}.PerScrape())
}
