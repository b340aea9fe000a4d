package dcgmsrc

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestToModelDropsSentinels(t *testing.T) {
	// The value dcgm-exporter's README shows leaking out as a reading.
	sn := readScrape(t, snippet)
	leaked := sn.values[model.FieldMemoryTemp]
	require.Equal(t, int64(9223372036854775794), leaked.Int)

	for name, v := range map[string]fieldValue{
		"readme's leaked not-supported": leaked,
		"int64 blank":                   {Type: fieldTypeInt64, Int: model.Int64Blank},
		"int64 not found":               {Type: fieldTypeInt64, Int: model.Int64Blank + 1},
		"int64 not permissioned":        {Type: fieldTypeInt64, Int: model.Int64Blank + 3},
		"fp64 blank":                    {Type: fieldTypeDouble, Float: model.Float64Blank},
		"fp64 not supported":            {Type: fieldTypeDouble, Float: model.Float64Blank + 2},
		"NaN":                           {Type: fieldTypeDouble, Float: math.NaN()},
		"failed status":                 {Type: fieldTypeInt64, Int: 31, Status: stNotWatched},
		"string":                        {Type: 's'},
	} {
		_, ok := v.toModel()
		assert.False(t, ok, name)
	}
}

func TestToModelKeepsReadings(t *testing.T) {
	ts := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	v, ok := fieldValue{Field: model.FieldGPUTemp, Type: fieldTypeInt64, Int: 31, TS: ts.UnixMicro()}.toModel()
	require.True(t, ok)
	assert.Equal(t, model.Value{Field: model.FieldGPUTemp, Int: 31, Time: time.UnixMicro(ts.UnixMicro())}, v)
	assert.True(t, v.Time.Equal(ts))

	v, ok = fieldValue{Field: model.FieldPowerUsage, Type: fieldTypeDouble, Float: 16.365}.toModel()
	require.True(t, ok)
	assert.Equal(t, model.Value{Field: model.FieldPowerUsage, Float: 16.365, IsFloat: true}, v)
	assert.True(t, v.Time.IsZero(), "no timestamp: the snapshot's time applies")

	// The largest real value below the blank range is a reading.
	v, ok = fieldValue{Type: fieldTypeInt64, Int: model.Int64Blank - 1}.toModel()
	require.True(t, ok)
	assert.Equal(t, model.Int64Blank-1, v.Int)
}
