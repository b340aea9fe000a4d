package dcgmsrc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DCGM return codes (dcgm_structs.h, dcgmReturn_t) this package acts on.
const (
	stNotSupported          = -6
	stNotWatched            = -16
	stGPUIsLost             = -18
	stConnectionNotValid    = -21
	stModuleNotLoaded       = -33
	stInUse                 = -34
	stProfilingNotSupported = -36
	stProfilingLibraryError = -37
	stProfilingMultiPass    = -38
)

// statusError is a DCGM call's failure with its return code. The
// production api turns go-dcgm's *dcgm.Error into one.
type statusError struct {
	Code int
	Msg  string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s (DCGM status %d)", e.Msg, e.Code)
}

// errNotConnected is returned, without reaching DCGM, by calls made while
// the connection is down.
var errNotConnected = errors.New("not connected to DCGM")

// dcgmMessages maps the text of DCGM's errorString() to its code. Most
// go-dcgm calls return only that text (fmt.Errorf("...: %s", ...)), so the
// code has to be read back from it.
var dcgmMessages = []struct {
	text string
	code int
}{
	{"host engine connection invalid/disconnected", stConnectionNotValid},
	{"affected resource is in use", stInUse},
	{"profiling is not supported for this group of gpus or gpu", stProfilingNotSupported},
	{"third-party profiling module returned an unrecoverable error", stProfilingLibraryError},
	{"cannot be collected in a single pass", stProfilingMultiPass},
	{"module of dcgm that is not currently loaded", stModuleNotLoaded},
	{"gpu is lost", stGPUIsLost},
	{"feature not supported", stNotSupported},
}

// statusOf returns the DCGM return code an error carries, if any: a
// statusError's code, "error code N" (go-dcgm's GetValuesSince), or a known
// errorString() text.
func statusOf(err error) (int, bool) {
	if err == nil {
		return 0, false
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.Code, true
	}
	msg := strings.ToLower(err.Error())
	if i := strings.LastIndex(msg, "error code "); i >= 0 {
		digits := msg[i+len("error code "):]
		end := 0
		for end < len(digits) && (digits[end] == '-' || (digits[end] >= '0' && digits[end] <= '9')) {
			end++
		}
		if code, convErr := strconv.Atoi(digits[:end]); convErr == nil {
			return code, true
		}
	}
	for _, m := range dcgmMessages {
		if strings.Contains(msg, m.text) {
			return m.code, true
		}
	}
	return 0, false
}

// isConnectionLost reports whether err means the host engine connection is
// gone (nv-hostengine restarted or died) or was already down.
func isConnectionLost(err error) bool {
	if errors.Is(err, errNotConnected) {
		return true
	}
	code, ok := statusOf(err)
	return ok && code == stConnectionNotValid
}

// isProfilingRefused reports whether err means DCGM cannot give profiling
// counters now, typically because another consumer (Nsight, CUPTI) holds
// them.
func isProfilingRefused(err error) bool {
	code, ok := statusOf(err)
	if !ok {
		return false
	}
	switch code {
	case stInUse, stProfilingNotSupported, stProfilingLibraryError, stProfilingMultiPass, stModuleNotLoaded:
		return true
	}
	return false
}

// isGPULost reports whether err means the GPU itself stopped answering.
func isGPULost(err error) bool {
	code, ok := statusOf(err)
	return ok && code == stGPUIsLost
}
