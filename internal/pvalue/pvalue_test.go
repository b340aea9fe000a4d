package pvalue

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestInt(t *testing.T) {
	for name, tc := range map[string]struct {
		v    pcommon.Value
		want int64
		ok   bool
	}{
		"int":               {pcommon.NewValueInt(-7), -7, true},
		"integral double":   {pcommon.NewValueDouble(4096), 4096, true},
		"negative double":   {pcommon.NewValueDouble(-3), -3, true},
		"fractional double": {pcommon.NewValueDouble(1.5), 0, false},
		"NaN":               {pcommon.NewValueDouble(math.NaN()), 0, false},
		"infinity":          {pcommon.NewValueDouble(math.Inf(1)), 0, false},
		"beyond 2^62":       {pcommon.NewValueDouble(1 << 63), 0, false},
		"string":            {pcommon.NewValueStr("12"), 0, false},
		"empty":             {pcommon.NewValueEmpty(), 0, false},
	} {
		got, ok := Int(tc.v)
		assert.Equal(t, tc.ok, ok, name)
		assert.Equal(t, tc.want, got, name)
	}
}
