//go:build !cgo

package dcgmsrc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

func TestNoCgoBuildFailsAtStart(t *testing.T) {
	s := New(NewConnections(), Config{}, zap.NewNop())
	err := s.Start(context.Background(), nil)
	require.ErrorIs(t, err, errNoCgo)
	require.NoError(t, s.Shutdown(context.Background()))

	a := newDCGMAPI()
	_, err = a.SupportedDevices()
	assert.ErrorIs(t, err, errNoCgo)
	_, _, err = a.ValuesSince(0, 0, time.Time{})
	assert.ErrorIs(t, err, errNoCgo)
}
