package actuator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestReleaseIDs(t *testing.T) {
	assert.Equal(t, []string{"a", "b"}, Request{FaultID: "a", FaultIDs: []string{"a", "b"}}.ReleaseIDs(), "every fault of ours")
	assert.Equal(t, []string{"a"}, Request{FaultID: "a"}.ReleaseIDs())
	assert.Nil(t, Request{}.ReleaseIDs(), "a human's release: every fault")
}
