package kmsgtest

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDmesgLine(t *testing.T) {
	line := "[Sun Feb 23 16:24:18 2025] NVRM: GPU Board Serial Number: 1650124014249"
	at, msg, ok := ParseDmesgLine(line, time.UTC)
	require.True(t, ok)
	assert.Equal(t, time.Date(2025, 2, 23, 16, 24, 18, 0, time.UTC), at)
	assert.Equal(t, "NVRM: GPU Board Serial Number: 1650124014249", msg)

	// dmesg prints local time: the location decides the instant.
	cet := time.FixedZone("CET", 3600)
	at, _, ok = ParseDmesgLine(line, cet)
	require.True(t, ok)
	assert.True(t, at.Equal(time.Date(2025, 2, 23, 15, 24, 18, 0, time.UTC)), at.String())

	// Single-digit days are padded with a space.
	at, msg, ok = ParseDmesgLine("[Mon Mar  3 01:02:03 2025] x", time.UTC)
	require.True(t, ok)
	assert.Equal(t, time.Date(2025, 3, 3, 1, 2, 3, 0, time.UTC), at)
	assert.Equal(t, "x", msg)

	for _, bad := range []string{
		"", "NVRM: Xid (PCI:0000:9b:00): 79, x", "[Sun Feb 23 16:24:18 2025 no bracket",
		"[  812345.678901] NVRM: Xid (PCI:0000:9b:00): 79, x", // dmesg without -T
		"[Sun Feb 31 16:24:18 2025] x",
	} {
		_, _, ok := ParseDmesgLine(bad, time.UTC)
		assert.False(t, ok, bad)
	}
}

func FuzzParseDmesgLine(f *testing.F) {
	for _, line := range fixtureLines(f) {
		f.Add(line)
	}
	f.Add("[Mon Mar  3 01:02:03 2025]")
	f.Fuzz(func(t *testing.T, line string) {
		at, msg, ok := ParseDmesgLine(line, time.UTC)
		if !ok {
			if !at.IsZero() || msg != "" {
				t.Fatalf("not ok but at=%v msg=%q", at, msg)
			}
			return
		}
		if at.IsZero() || !strings.HasSuffix(line, msg) {
			t.Fatalf("at=%v msg=%q from %q", at, msg, line)
		}
	})
}

// fixtureLines are the lines of the kmsg package's dmesg -T capture.
func fixtureLines(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("../testdata/gpud_dmesg-with-xid-119.log")
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	return lines
}
