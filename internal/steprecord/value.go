package steprecord

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Int reads an integer: an int, or a double holding an integral value
// (JSON encoders, the Python SDK among them, send numbers as doubles).
// Doubles beyond ±2^62 are refused: converting them is undefined.
func Int(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		if f := v.Double(); f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return int64(f), true
		}
	}
	return 0, false
}

// Stage reads training.pp_stage as the name of a group of ranks: an integer
// (Int) in decimal, or a string as sent. The contract sends an int; strings
// are still taken, as the straggler processor always took them (a stage
// named by the script groups ranks as well as a number).
func Stage(v pcommon.Value) (string, bool) {
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str(), true
	}
	if n, ok := Int(v); ok {
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

// Valid reports whether v has the contract's type for f
// (docs/training-scripts.md): a string, an integer (Int), a number (an int
// or a double; NaN and infinities included: a NaN loss is a signal), a
// stage (Stage), or a list of strings or of integers.
func Valid(f Field, v pcommon.Value) bool {
	switch f {
	case FieldJob, FieldHost, FieldGPU, FieldCollectivesMaxName:
		return v.Type() == pcommon.ValueTypeStr
	case FieldStage:
		_, ok := Stage(v)
		return ok
	case FieldLoss, FieldFlops, FieldHealthSMActive, FieldHealthTemperature, FieldHealthWindowS:
		return v.Type() == pcommon.ValueTypeDouble || v.Type() == pcommon.ValueTypeInt
	case FieldHealthThrottle:
		return sliceOf(v, func(e pcommon.Value) bool { return e.Type() == pcommon.ValueTypeStr })
	case FieldCollectivesOffsetsNs, FieldHealthXIDs:
		return sliceOf(v, func(e pcommon.Value) bool { _, ok := Int(e); return ok })
	case FieldNone:
		return false
	}
	_, ok := Int(v)
	return ok
}

func sliceOf(v pcommon.Value, elem func(pcommon.Value) bool) bool {
	if v.Type() != pcommon.ValueTypeSlice {
		return false
	}
	s := v.Slice()
	for i := 0; i < s.Len(); i++ {
		if !elem(s.At(i)) {
			return false
		}
	}
	return true
}
