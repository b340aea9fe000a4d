// Package pvalue reads attribute values the way every component of
// otelcol-gpu accepts them.
package pvalue // import "github.com/otelcol-gpu/otelcol-gpu/internal/pvalue"

import (
	"math"

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
