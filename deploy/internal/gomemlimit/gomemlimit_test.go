package gomemlimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"3300MiB": 3300 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40, "512KiB": 512 << 10, "100B": 100, "4096": 4096,
	} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "3300M", "3.5GiB", "-1MiB", "GiB", "99999999999TiB"} {
		_, err := Parse(in)
		assert.ErrorContains(t, err, "GOMEMLIMIT", in)
	}
}

func TestParseSystemd(t *testing.T) {
	for in, want := range map[string]int64{"6G": 6 << 30, "512M": 512 << 20, "1T": 1 << 40, "64K": 64 << 10, "1000": 1000} {
		got, err := ParseSystemd(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"6GiB", "infinity", "50%"} {
		_, err := ParseSystemd(in)
		assert.ErrorContains(t, err, "systemd size", in)
	}
}

func TestCheck(t *testing.T) {
	const gib = int64(1) << 30
	// 80 % - 20 % of 6 GiB is 3686 MiB.
	require.NoError(t, Check(3300<<20, 6*gib, 80, 20))
	assert.ErrorContains(t, Check(3700<<20, 6*gib, 80, 20),
		"GOMEMLIMIT 3700 MiB is not below the memory_limiter's soft limit, 3686 MiB (limit_percentage 80, spike_limit_percentage 20 of 6144 MiB)")
	assert.ErrorContains(t, Check(2900<<20, 6*gib, 80, 20), "under 80 %")
	// No spike limit: a fifth of the limit, 80 % of 4915 MiB = 3932 MiB.
	require.NoError(t, Check(3700<<20, 6*gib, 80, 0))
	assert.ErrorContains(t, Check(3940<<20, 6*gib, 80, 0), "3932 MiB")
	assert.ErrorContains(t, Check(1, 6*gib, 0, 0), "limit_percentage 0")
	assert.ErrorContains(t, Check(1, 6*gib, 20, 20), "want 0 <= spike < limit")
}

func TestCheckConfig(t *testing.T) {
	const gib = int64(1) << 30
	config := []byte(`
processors:
  memory_limiter:
    check_interval: 1s
    limit_percentage: 80
    spike_limit_percentage: 20
`)
	require.NoError(t, CheckConfig(3300<<20, 6*gib, config))
	assert.ErrorContains(t, CheckConfig(3700<<20, 6*gib, config), "3686 MiB")
	assert.ErrorContains(t, CheckConfig(3300<<20, 6*gib, []byte("processors: {}")), "limit_percentage 0")
	assert.ErrorContains(t, CheckConfig(3300<<20, 6*gib, []byte("processors: [")), "collector configuration")
}
