//go:build gpu && cgo

package verify

// These tests run DCGM's level-1 diagnostic on a real GPU: `go test -tags
// gpu`. The library test starts DCGM embedded (needs libdcgm.so.4) unless
// DCGM_TEST_ENDPOINT names a running nv-hostengine; the command test needs
// dcgmi on PATH and a host engine. DCGM_TEST_SAVE=path keeps dcgmi's JSON,
// a real sample for testdata (with a SOURCES.md line).

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func realLib() DCGMLib {
	if ep := os.Getenv("DCGM_TEST_ENDPOINT"); ep != "" {
		return NewDCGMLib(false, ep)
	}
	return NewDCGMLib(true, "")
}

// firstGPU asks DCGM for its first GPU.
func firstGPU(t *testing.T, lib DCGMLib) GPU {
	t.Helper()
	cleanup, err := lib.Init()
	require.NoError(t, err)
	defer cleanup()
	devices, err := lib.GPUs()
	require.NoError(t, err)
	require.NotEmpty(t, devices, "DCGM lists no GPU")
	return GPU{UUID: devices[0].UUID, Index: int(devices[0].ID)}
}

func TestRealLibraryDiagLevel1(t *testing.T) {
	lib := realLib()
	g := firstGPU(t, lib)
	r, err := NewLibraryDiag(lib, LibraryDiagOptions{Timeouts: DiagTimeouts{Quick: 10 * time.Minute}})
	require.NoError(t, err)
	defer func() { assert.NoError(t, r.Close(context.Background())) }()
	res, err := r.Run(t.Context(), diagRequest(1, g))
	require.NoError(t, err)
	require.Len(t, res, 1)
	t.Logf("%s: passed=%v %s tests=%+v", g.UUID, res[0].Passed, res[0].Detail, res[0].Tests)
	assert.Equal(t, g.UUID, res[0].GPU)
	assert.NotContains(t, res[0].Detail, "no result", "DCGM ran no test on the GPU")
}

func TestRealCommandDiagLevel1(t *testing.T) {
	path, err := exec.LookPath("dcgmi")
	require.NoError(t, err, "dcgmi is not on PATH")
	g := firstGPU(t, realLib())
	out, _ := exec.Command(path, "diag", "-r", "1", "-j", "-i", strconv.Itoa(g.Index)).Output()
	if save := os.Getenv("DCGM_TEST_SAVE"); save != "" {
		require.NoError(t, os.WriteFile(save, out, 0o644))
	}
	_, err = ParseDiagJSON(out)
	require.NoError(t, err, "dcgmi's own output does not parse:\n%s", out)
	r, err := NewCommandDiag(CommandDiagOptions{Command: append([]string{path}, DefaultDiagCommand[1:]...)})
	require.NoError(t, err)
	res, err := r.Run(t.Context(), diagRequest(1, g))
	require.NoError(t, err)
	t.Logf("%s: passed=%v %s tests=%+v", g.UUID, res[0].Passed, res[0].Detail, res[0].Tests)
	assert.NotContains(t, res[0].Detail, "no result")
}
