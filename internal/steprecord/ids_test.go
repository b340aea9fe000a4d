package steprecord

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The contract's formulas, computed here by hand from the bytes the
// documentation names, not through the code under test.
func TestIDsFollowTheContract(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	job, attempt, step, rank := "llama-70b", int64(1), int64(18231), int64(1045)
	if got, want := TraceID(job, attempt, step).String(), sum("llama-70b\x001\x0018231")[:32]; got != want {
		t.Errorf("TraceID = %s, want %s", got, want)
	}
	if got, want := RankSpanID(job, attempt, step, rank).String(), sum("llama-70b\x001\x0018231\x001045")[:16]; got != want {
		t.Errorf("RankSpanID = %s, want %s", got, want)
	}
	if got, want := RootSpanID(job, attempt, step).String(), sum("llama-70b\x001\x0018231\x00root")[:16]; got != want {
		t.Errorf("RootSpanID = %s, want %s", got, want)
	}
	if TraceID(job, 0, step) == TraceID(job, 1, step) {
		t.Error("a restarted job (attempt 1) must not collide with attempt 0")
	}
}
