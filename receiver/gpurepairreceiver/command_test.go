package gpurepairreceiver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

var testGPU = verify.GPU{UUID: gpu1, Index: 1}

func TestCommandResetSucceeds(t *testing.T) {
	c := &commandReset{argv: []string{"echo", "reset", "-i", "{index}", "--id={uuid}"}, timeout: time.Minute}
	out, err := c.reset(context.Background(), testGPU)
	require.NoError(t, err)
	assert.Equal(t, ResetOutcome{ExitCode: 0, Output: "reset -i 1 --id=" + gpu1 + "\n"}, out)
}

func TestCommandResetOutputBounded(t *testing.T) {
	c := &commandReset{argv: []string{"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x; echo {index}"}, timeout: time.Minute}
	out, err := c.reset(context.Background(), testGPU)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out.Output, strings.Repeat("x", maxOutputBytes)+"... ("), out.Output[maxOutputBytes-10:])
	assert.Less(t, len(out.Output), maxOutputBytes+64)
}

// Past its timeout the command's process group is killed.
func TestCommandResetTimeout(t *testing.T) {
	c := &commandReset{argv: []string{"sh", "-c", "sleep 600 & wait # {index}"}, timeout: 50 * time.Millisecond}
	out, err := c.reset(context.Background(), testGPU)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not end within 50ms: killed")
	assert.Equal(t, -1, out.ExitCode)
}

func TestCommandResetMissingProgram(t *testing.T) {
	c := &commandReset{argv: []string{"/nonexistent/nvidia-smi", "{index}"}, timeout: time.Minute}
	out, err := c.reset(context.Background(), testGPU)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "running /nonexistent/nvidia-smi")
	assert.Equal(t, -1, out.ExitCode)
}
