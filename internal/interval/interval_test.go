package interval

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheck(t *testing.T) {
	assert.NoError(t, Check("collection_interval", Floor, false))
	assert.NoError(t, Check("collection_interval", 10*time.Second, false))
	assert.NoError(t, Check("profiling_interval", 0, true))
	assert.EqualError(t, Check("collection_interval", 10, false),
		"collection_interval: 10ns is under the 100ms floor; give a unit (10s, 500ms): a bare number is read as nanoseconds")
	assert.EqualError(t, Check("collection_interval", 30*time.Microsecond, false),
		"collection_interval: 30µs is under the 100ms floor; give a unit (10s, 500ms): a bare number is read as nanoseconds")
	assert.ErrorContains(t, Check("collection_interval", 0, false), "collection_interval: 0s is under the 100ms floor")
	assert.EqualError(t, Check("profiling_interval", -time.Second, true), "profiling_interval: must not be negative, got -1s")
}
