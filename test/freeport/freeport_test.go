package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Addresses are free, distinct, and below the ephemeral range where
// outgoing connections take their ports.
func TestAddrIsFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr, err := Addr()
		require.NoError(t, err)
		assert.False(t, seen[addr], "handed out twice: %s", addr)
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		if ephemeralLow() > 1024+span {
			assert.Less(t, port, ephemeralLow())
		}
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "free to bind")
		require.NoError(t, ln.Close())
	}
}
