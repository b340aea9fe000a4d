// Package kmsgtest reads `dmesg -T` captures, the form kernel-log fixtures
// are published in, for the tests of the packages that read the kernel log:
// they turn a capture's lines into the /dev/kmsg records and messages the
// receiver really reads.
package kmsgtest // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg/kmsgtest"

import (
	"strings"
	"time"
)

// dmesgTimeLayout is the ctime(3) form `dmesg -T` prints: [Sun Feb 23 16:24:18 2025].
const dmesgTimeLayout = "Mon Jan _2 15:04:05 2006"

// ParseDmesgLine splits a line of `dmesg -T` output into its time, read in
// loc (dmesg prints local time without a zone), and the kernel message. A
// line without the bracketed time returns ok=false.
func ParseDmesgLine(line string, loc *time.Location) (t time.Time, msg string, ok bool) {
	rest, found := strings.CutPrefix(line, "[")
	if !found {
		return time.Time{}, "", false
	}
	stamp, msg, found := strings.Cut(rest, "]")
	if !found {
		return time.Time{}, "", false
	}
	t, err := time.ParseInLocation(dmesgTimeLayout, strings.TrimSpace(stamp), loc)
	if err != nil {
		return time.Time{}, "", false
	}
	return t, strings.TrimPrefix(msg, " "), true
}
