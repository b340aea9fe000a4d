package kmsg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const procStatSample = `cpu  4705 356 584 3699176 23060 0 277 0 0 0
cpu0 1393 280 209 924301 6137 0 204 0 0 0
intr 1462898 21 9 0 0 0 0 3 0 1 0 0 0 0
ctxt 2195218
btime 1740000000
processes 8530
procs_running 2
`

func TestParseBootTime(t *testing.T) {
	at, err := parseBootTime(strings.NewReader(procStatSample))
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1740000000, 0), at)

	// A big machine's intr line is longer than a line scanner's default buffer.
	long := "intr" + strings.Repeat(" 0", 200_000) + "\nbtime 1740000001\n"
	at, err = parseBootTime(strings.NewReader(long))
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1740000001, 0), at)

	_, err = parseBootTime(strings.NewReader("cpu 1 2 3\n"))
	require.ErrorContains(t, err, "no btime line")
	_, err = parseBootTime(strings.NewReader("btime soon\n"))
	require.ErrorContains(t, err, `btime "soon"`)
	_, err = parseBootTime(strings.NewReader("btime 0\n"))
	require.Error(t, err)
}

func TestReadBootTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stat")
	require.NoError(t, os.WriteFile(path, []byte(procStatSample), 0o600))
	at, err := readBootTime(path)
	require.NoError(t, err)
	assert.Equal(t, int64(1740000000), at.Unix())

	require.NoError(t, os.WriteFile(path, []byte("cpu 0\n"), 0o600))
	_, err = readBootTime(path)
	require.ErrorContains(t, err, path)

	_, err = readBootTime(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
