package metadata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIdentity(t *testing.T) {
	assert.Equal(t, "faultcorrelator", Type.String())
	assert.Contains(t, ScopeName, "processor/faultcorrelator")
}
