package sdktest

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// checkStepRecord reads what the SDK sent for a step (a train.step span's
// attributes, or a step log record's) with the reader every component of
// the collector uses, and fails the test unless that reader takes it whole:
// an identity, the phases, the resource's world size and local rank, and no
// attribute of the record ignored for its type. It returns the identity the
// collector reads, which must be the one the ids were computed from.
func checkStepRecord(t *testing.T, what string, attrs, resource pcommon.Map) steprecord.Identity {
	t.Helper()
	rec := steprecord.Read(attrs, resource)
	id, err := rec.Identity()
	if err != nil {
		t.Errorf("%s: the collector rejects the record: %v", what, err)
	}
	for _, m := range []pcommon.Map{attrs, resource} {
		for k, v := range m.All() {
			if f := steprecord.FieldOf(k); f != steprecord.FieldNone && !steprecord.Valid(f, v) {
				t.Errorf("%s: the collector ignores %s = %s: not of the contract's type", what, k, describe(v, true))
			}
		}
	}
	for _, f := range []steprecord.Field{steprecord.FieldWorldSize, steprecord.FieldLocalRank, steprecord.FieldHost,
		steprecord.FieldPhaseDataload, steprecord.FieldPhaseForward, steprecord.FieldPhaseBackward, steprecord.FieldPhaseOptimizer} {
		if !rec.Has(f) {
			t.Errorf("%s: the collector finds no %s", what, f.Key())
		}
	}
	return id
}

// checkIdentity is checkStepRecord, also failing unless the identity the
// collector reads is want.
func checkIdentity(t *testing.T, what string, attrs, resource pcommon.Map, want steprecord.Identity) {
	t.Helper()
	if got := checkStepRecord(t, what, attrs, resource); got != want {
		t.Errorf("%s: the collector reads identity %+v, want %+v", what, got, want)
	}
}
