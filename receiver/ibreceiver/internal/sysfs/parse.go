package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import (
	"errors"
	"math"
)

// Sentinel errors returned by the Parse* functions. Callers match them with
// errors.Is; the reader wraps them with the path of the file.
var (
	// ErrNotAvailable is returned for values the kernel reports as
	// unavailable, e.g. "N/A (no PMA)" on iWARP devices without a
	// Performance Management Agent.
	ErrNotAvailable = errors.New("value not available")
	// ErrEmpty is returned for empty (or whitespace-only) contents, e.g. a
	// truncated file.
	ErrEmpty = errors.New("empty value")
	// ErrSyntax is returned for contents that do not have the expected form.
	ErrSyntax = errors.New("invalid syntax")
	// ErrRange is returned for numbers that do not fit in 64 bits.
	ErrRange = errors.New("value out of range")
)

// ParseCounter parses the contents of a sysfs counter file: a decimal
// unsigned integer, optionally surrounded by ASCII whitespace (sysfs files end
// with a newline). Every value up to math.MaxUint64 is accepted; larger values
// return ErrRange. Contents starting with "N/A" return ErrNotAvailable, empty
// contents ErrEmpty, and anything else (signs, hex, "12ab", embedded spaces)
// ErrSyntax.
//
// ParseCounter does not clamp: values above math.MaxInt64 are returned as they
// are, and it is up to the caller to map them into an int64 data point (the
// receiver saturates at math.MaxInt64).
func ParseCounter(b []byte) (uint64, error) {
	b = trimSpace(b)
	if len(b) == 0 {
		return 0, ErrEmpty
	}
	if hasPrefix(b, "N/A") {
		return 0, ErrNotAvailable
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, ErrSyntax
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, ErrRange
		}
		v = v*10 + d
	}
	return v, nil
}

// ParseState parses a port state file such as "4: ACTIVE" (ports/N/state) or
// "5: LinkUp" (ports/N/phys_state) into its numeric code and its text. The
// code must be a decimal number below 2^32 and the text must not be empty.
// Common texts are returned without allocating.
func ParseState(b []byte) (code int64, text string, err error) {
	b = trimSpace(b)
	if len(b) == 0 {
		return 0, "", ErrEmpty
	}
	if hasPrefix(b, "N/A") {
		return 0, "", ErrNotAvailable
	}
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		code = code*10 + int64(b[i]-'0')
		if code > math.MaxUint32 {
			return 0, "", ErrRange
		}
	}
	if i == 0 || i >= len(b) || b[i] != ':' {
		return 0, "", ErrSyntax
	}
	rest := trimSpace(b[i+1:])
	if len(rest) == 0 {
		return 0, "", ErrSyntax
	}
	return code, internState(rest), nil
}

// internState returns well-known state texts as constants so that parsing the
// same state every scrape does not allocate.
func internState(b []byte) string {
	switch string(b) {
	case "ACTIVE":
		return "ACTIVE"
	case "DOWN":
		return "DOWN"
	case "INIT":
		return "INIT"
	case "ARMED":
		return "ARMED"
	case "ACTIVE_DEFER":
		return "ACTIVE_DEFER"
	case "NOP":
		return "NOP"
	case "LinkUp":
		return "LinkUp"
	case "Polling":
		return "Polling"
	case "Disabled":
		return "Disabled"
	case "Sleep":
		return "Sleep"
	case "PortConfigurationTraining":
		return "PortConfigurationTraining"
	case "LinkErrorRecovery":
		return "LinkErrorRecovery"
	case "Phy Test":
		return "Phy Test"
	}
	return string(b)
}

// ParseRate parses a port rate file such as "100 Gb/sec (4X EDR)",
// "2.5 Gb/sec" or "10 Gb/sec (4X)" and returns the rate in bytes per second
// (Gb/sec * 1e9 / 8, computed in integers; fractional digits beyond the
// ninth are ignored). "Mb/sec" is accepted too. Anything after the unit is
// ignored.
func ParseRate(b []byte) (uint64, error) {
	b = trimSpace(b)
	if len(b) == 0 {
		return 0, ErrEmpty
	}
	if hasPrefix(b, "N/A") {
		return 0, ErrNotAvailable
	}
	var whole uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if whole > (math.MaxUint64-d)/10 {
			return 0, ErrRange
		}
		whole = whole*10 + d
	}
	if i == 0 {
		return 0, ErrSyntax
	}
	// Fraction in units of 1e-9.
	var frac uint64
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		scale := uint64(100000000)
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			frac += uint64(b[i]-'0') * scale
			scale /= 10
		}
		if i == start {
			return 0, ErrSyntax
		}
	}
	for i < len(b) && b[i] == ' ' {
		i++
	}
	unit := b[i:]
	var mult uint64 // bits per second per unit
	switch {
	case hasPrefix(unit, "Gb/s"):
		mult = 1e9
	case hasPrefix(unit, "Mb/s"):
		mult = 1e6
	default:
		return 0, ErrSyntax
	}
	if whole > math.MaxUint64/mult {
		return 0, ErrRange
	}
	bits := whole * mult
	fracBits := frac / (1e9 / mult) // frac is in 1e-9 units
	if bits > math.MaxUint64-fracBits {
		return 0, ErrRange
	}
	return (bits + fracBits) / 8, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == 0
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}
