package inspector

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScannerSkipsAnyValue(t *testing.T) {
	for _, v := range []string{`1`, `-1.5e3`, `"s\"\\"`, `true`, `false`, `null`, `[]`, `{}`, `[1,[2,{"a":[]}],"x"]`, ` { "a" : { "b" : [ 1 , 2 ] } } `, `nan`, `-inf`} {
		s := scanner{b: []byte(v)}
		require.NoError(t, s.skip(0), v)
		assert.Zero(t, s.peek(), "consumed %s", v)
	}
}

func TestScannerIntegers(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{`0`, 0, true}, {`-7`, -7, true}, {`"42"`, 42, true}, {`1e3`, 1000, true},
		{`9223372036854775807`, math.MaxInt64, true}, {`-9223372036854775808`, math.MinInt64, true},
		{`123456789012345678`, 123456789012345678, true},
		{`"nan"`, 0, false}, {`inf`, 0, false}, {`null`, 0, false}, {`""`, 0, false},
	}
	for _, tt := range tests {
		s := scanner{b: []byte(tt.in)}
		v, ok, err := s.integer()
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.ok, ok, tt.in)
		assert.Equal(t, tt.want, v, tt.in)
	}
	s := scanner{b: []byte(`9223372036854775808`)}
	_, _, err := s.integer()
	require.Error(t, err, "2^63 does not fit")
	s = scanner{b: []byte(`1.5`)}
	_, _, err = s.integer()
	require.Error(t, err)
}

func TestParseFloatSpecials(t *testing.T) {
	for in, want := range map[string]float64{"nan": math.NaN(), "-nan": math.NaN(), "+NaN": math.NaN(), "inf": math.Inf(1), "-inf": math.Inf(-1), "1e400": math.Inf(1), "0.5": 0.5} {
		got, err := parseFloat([]byte(in))
		require.NoError(t, err, in)
		if math.IsNaN(want) {
			assert.True(t, math.IsNaN(got), in)
		} else {
			assert.Equal(t, want, got, in)
		}
	}
	_, err := parseFloat([]byte("x1"))
	require.Error(t, err)
}
