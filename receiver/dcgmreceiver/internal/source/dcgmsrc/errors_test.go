package dcgmsrc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		ok   bool
	}{
		{nil, 0, false},
		{errors.New("something else"), 0, false},
		{&statusError{Code: stInUse, Msg: "x"}, stInUse, true},
		{fmt.Errorf("wrapped: %w", &statusError{Code: stGPUIsLost}), stGPUIsLost, true},
		// go-dcgm's plain errors carry DCGM's errorString() text only.
		{errors.New("error watching fields: " + msgConnection), stConnectionNotValid, true},
		{errors.New("error creating group: " + msgInUse), stInUse, true},
		{errors.New("Profiling is not supported for this group of GPUs or GPU"), stProfilingNotSupported, true},
		{errors.New("GPU is lost"), stGPUIsLost, true},
		// go-dcgm's GetValuesSince gives the number.
		{errors.New("dcgmGetValuesSince_v2 failed with error code -21"), stConnectionNotValid, true},
		{errors.New("failed with error code -"), 0, false},
	} {
		code, ok := statusOf(tc.err)
		assert.Equal(t, tc.ok, ok, "%v", tc.err)
		assert.Equal(t, tc.code, code, "%v", tc.err)
	}
}

func TestClassifiers(t *testing.T) {
	assert.True(t, isConnectionLost(errNotConnected))
	assert.True(t, isConnectionLost(fmt.Errorf("x: %w", errNotConnected)))
	assert.True(t, isConnectionLost(errors.New(msgConnection)))
	assert.False(t, isConnectionLost(errors.New(msgInUse)))

	assert.True(t, isProfilingRefused(errors.New(msgInUse)))
	assert.True(t, isProfilingRefused(&statusError{Code: stProfilingNotSupported}))
	assert.False(t, isProfilingRefused(errors.New(msgConnection)))
	assert.False(t, isProfilingRefused(nil))

	assert.True(t, isGPULost(&statusError{Code: stGPUIsLost}))
	assert.False(t, isGPULost(errors.New("timeout")))
	assert.Contains(t, (&statusError{Code: -34, Msg: "in use"}).Error(), "-34")
}

// FuzzStatusOf checks that any error text is classified without panicking,
// and consistently with the classifiers.
func FuzzStatusOf(f *testing.F) {
	f.Add("error watching fields: " + msgConnection)
	f.Add(msgInUse)
	f.Add("dcgmGetValuesSince_v2 failed with error code -21")
	f.Add("error code 99999999999999999999")
	f.Add("error code --")
	f.Fuzz(func(t *testing.T, msg string) {
		err := errors.New(msg)
		code, ok := statusOf(err)
		if !ok && code != 0 {
			t.Fatalf("code %d without ok", code)
		}
		if isConnectionLost(err) != (ok && code == stConnectionNotValid) {
			t.Fatalf("isConnectionLost disagrees with statusOf for %q", msg)
		}
	})
}
