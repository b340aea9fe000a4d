package steprecord

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

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

func TestStage(t *testing.T) {
	for name, tc := range map[string]struct {
		v    pcommon.Value
		want string
		ok   bool
	}{
		"int":               {pcommon.NewValueInt(3), "3", true},
		"integral double":   {pcommon.NewValueDouble(2), "2", true},
		"string":            {pcommon.NewValueStr("first"), "first", true},
		"fractional double": {pcommon.NewValueDouble(1.5), "", false},
		"bool":              {pcommon.NewValueBool(true), "", false},
	} {
		got, ok := Stage(tc.v)
		assert.Equal(t, tc.ok, ok, name)
		assert.Equal(t, tc.want, got, name)
	}
}

func TestValid(t *testing.T) {
	strs, ints := pcommon.NewValueSlice(), pcommon.NewValueSlice()
	strs.Slice().AppendEmpty().SetStr("power")
	ints.Slice().AppendEmpty().SetDouble(79)
	for name, tc := range map[string]struct {
		f    Field
		v    pcommon.Value
		want bool
	}{
		"job a string":          {FieldJob, pcommon.NewValueStr("j"), true},
		"job an int":            {FieldJob, pcommon.NewValueInt(1), false},
		"rank an integral 5.0":  {FieldRank, pcommon.NewValueDouble(5), true},
		"rank 5.5":              {FieldRank, pcommon.NewValueDouble(5.5), false},
		"tokens a string":       {FieldTokens, pcommon.NewValueStr("16k"), false},
		"loss NaN":              {FieldLoss, pcommon.NewValueDouble(math.NaN()), true},
		"flops an int":          {FieldFlops, pcommon.NewValueInt(7), true},
		"stage a name":          {FieldStage, pcommon.NewValueStr("first"), true},
		"throttle strings":      {FieldHealthThrottle, strs, true},
		"throttle an int":       {FieldHealthThrottle, pcommon.NewValueInt(0), false},
		"xids integers":         {FieldHealthXIDs, ints, true},
		"xids strings":          {FieldHealthXIDs, strs, false},
		"not the record's":      {FieldNone, pcommon.NewValueStr("x"), false},
		"health count a double": {FieldHealthECCSBE, pcommon.NewValueDouble(1.5), false},
	} {
		assert.Equal(t, tc.want, Valid(tc.f, tc.v), name)
	}
}
