//go:build gpu

package gpurepairreceiver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRealNVMLDevices runs against the NVML of the machine (go test -tags
// gpu): it needs an NVIDIA GPU and driver, so CI does not run it. It lists
// the GPUs and their processes, and never resets anything (the reset
// command is `true`).
func TestRealNVMLDevices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := newNVMLDevices(nvml.New(), DefaultCallTimeout, &commandReset{argv: []string{"true", "{index}"}, timeout: time.Minute})
	defer func() { require.NoError(t, d.Shutdown(ctx)) }()
	inv, err := d.Inventory(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, inv, "no GPU found")
	procs, err := d.Processes(ctx)
	require.NoError(t, err)
	for i, g := range inv {
		assert.Equal(t, i, g.Index)
		assert.True(t, strings.HasPrefix(g.UUID, "GPU-"), "UUID %q", g.UUID)
		pids, ok := procs[g.UUID]
		assert.True(t, ok, "GPU %d (%s) did not answer the process query", g.Index, g.UUID)
		t.Logf("GPU %d %s processes %v", g.Index, g.UUID, pids)
	}
	b := &busyChecker{devices: d, now: time.Now}
	st, err := b.nodeStatus(ctx, "this-node", "boot")
	require.NoError(t, err)
	t.Logf("node status %+v", st)
}
