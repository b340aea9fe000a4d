package sysfs

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCounter(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr error
	}{
		{"0\n", 0, nil},
		{"4631917\n", 4631917, nil},
		{"2880761508848\n", 2880761508848, nil},
		{"  42 \t\n", 42, nil},
		{"4294967295", 4294967295, nil},
		{"9223372036854775807\n", math.MaxInt64, nil},
		{"9223372036854775808\n", math.MaxInt64 + 1, nil},
		{"18446744073709551615\n", math.MaxUint64, nil},
		{"18446744073709551616\n", 0, ErrRange},
		{"99999999999999999999999\n", 0, ErrRange},
		{"N/A (no PMA)\n", 0, ErrNotAvailable},
		{"N/A", 0, ErrNotAvailable},
		{"", 0, ErrEmpty},
		{"\n", 0, ErrEmpty},
		{"12ab", 0, ErrSyntax},
		{"-1", 0, ErrSyntax},
		{"+1", 0, ErrSyntax},
		{"0x10", 0, ErrSyntax},
		{"1 2", 0, ErrSyntax},
		{"1.5", 0, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := ParseCounter([]byte(tt.in))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseState(t *testing.T) {
	tests := []struct {
		in       string
		code     int64
		text     string
		wantErr  error
		anyError bool
	}{
		{in: "4: ACTIVE\n", code: 4, text: "ACTIVE"},
		{in: "5: LinkUp\n", code: 5, text: "LinkUp"},
		{in: "1: DOWN", code: 1, text: "DOWN"},
		{in: "3: Disabled\n", code: 3, text: "Disabled"},
		{in: "7:Weird State\n", code: 7, text: "Weird State"},
		{in: "", wantErr: ErrEmpty},
		{in: "N/A (no PMA)", wantErr: ErrNotAvailable},
		{in: "ACTIVE", wantErr: ErrSyntax},
		{in: "4 ACTIVE", wantErr: ErrSyntax},
		{in: "4:", wantErr: ErrSyntax},
		{in: "4:   \n", wantErr: ErrSyntax},
		{in: ": ACTIVE", wantErr: ErrSyntax},
		{in: "99999999999: X", wantErr: ErrRange},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			code, text, err := ParseState([]byte(tt.in))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.text, text)
		})
	}
}

func TestParseStateDoesNotAllocateForKnownStates(t *testing.T) {
	in := []byte("4: ACTIVE\n")
	allocs := testing.AllocsPerRun(100, func() {
		_, _, _ = ParseState(in)
	})
	assert.Zero(t, allocs)
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr error
	}{
		{"100 Gb/sec (4X EDR)\n", 12500000000, nil},
		{"25 Gb/sec (1X EDR)\n", 3125000000, nil},
		{"40 Gb/sec (4X QDR)\n", 5000000000, nil},
		{"10 Gb/sec (4X)\n", 1250000000, nil},
		{"2.5 Gb/sec\n", 312500000, nil},
		{"10 Gb/sec", 1250000000, nil},
		{"53.125 Gb/sec (1X HDR)", 6640625000, nil},
		{"400 Gb/sec (4X NDR)\n", 50000000000, nil},
		{"100 Mb/sec\n", 12500000, nil},
		{"", 0, ErrEmpty},
		{"N/A", 0, ErrNotAvailable},
		{"fast", 0, ErrSyntax},
		{"100", 0, ErrSyntax},
		{"100 Tb/sec", 0, ErrSyntax},
		{"2. Gb/sec", 0, ErrSyntax},
		{"99999999999999999999 Gb/sec", 0, ErrRange},
		{"18446744073709551615 Gb/sec", 0, ErrRange},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := ParseRate([]byte(tt.in))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Seeds: values from the fixtures in ../../testdata plus edge cases.
var counterSeeds = []string{
	"0\n", "4631917\n", "6825908347\n", "4294967295\n", "2880761508848\n",
	"345091702026\n", "175528982\n", "N/A (no PMA)\n", "", "12ab", "18446744073709551615",
	"18446744073709551616", "-0", " \n",
}

func FuzzParseCounter(f *testing.F) {
	for _, s := range counterSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseCounter(b)
		if err != nil {
			if v != 0 {
				t.Fatalf("value %d with error %v", v, err)
			}
			if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) && !errors.Is(err, ErrNotAvailable) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// A successfully parsed value round-trips through its decimal form.
		w, err := strconv.ParseUint(string(trimSpace(b)), 10, 64)
		if err != nil || w != v {
			t.Fatalf("ParseCounter(%q) = %d, strconv says %d, %v", b, v, w, err)
		}
	})
}

func FuzzParseState(f *testing.F) {
	for _, s := range []string{"4: ACTIVE\n", "5: LinkUp\n", "1: DOWN\n", "3: Disabled", "", "N/A", "4:", ":x", "4294967296: X"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		code, text, err := ParseState(b)
		if err != nil {
			return
		}
		if code < 0 || code > math.MaxUint32 || text == "" {
			t.Fatalf("ParseState(%q) = %d, %q", b, code, text)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100 Gb/sec (4X EDR)\n", "25 Gb/sec (1X EDR)\n", "40 Gb/sec (4X QDR)\n", "10 Gb/sec (4X)\n", "2.5 Gb/sec\n", "53.125 Gb/sec", "1.0000000001 Mb/sec", "", "N/A"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseRate(b)
		if err != nil && v != 0 {
			t.Fatalf("value %d with error %v", v, err)
		}
		if err == nil && v > math.MaxUint64/8 {
			t.Fatalf("ParseRate(%q) = %d: larger than possible", b, v)
		}
	})
}
