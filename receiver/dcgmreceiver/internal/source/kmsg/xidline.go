package kmsg // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg"

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Event is one XID as NVIDIA's driver wrote it to the kernel log.
type Event struct {
	// PCIBusID in NVML's long form: 00000000:9b:00.0 (see NormalizePCIBusID).
	PCIBusID string
	Code     int
	// PID and ProcessName are zero when the driver did not name a process
	// (older drivers, or pid='<unknown>').
	PID         int
	ProcessName string
	// Message is the driver's text after the code and process fields.
	Message string
}

// xidMarker starts every XID line. NVSwitch errors read "SXid" and do not
// match.
const xidMarker = "NVRM: Xid ("

// ParseXIDLine recognises an XID in one kernel log message, e.g.
//
//	NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...
//	NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error ...
//	NVRM: Xid (0000:9b:00): 79, GPU has fallen off the bus.
//
// Text before the marker (a dmesg or syslog timestamp) is ignored. A line
// without an XID returns ok=false and a nil error. A line with the marker
// but no usable bus id or code returns an error saying what is wrong (and
// ok=false). A pid that is not a number is left as 0 rather than losing the
// event: the code and the GPU are what matter.
func ParseXIDLine(line string) (ev Event, ok bool, err error) {
	i := strings.Index(line, xidMarker)
	if i < 0 {
		return Event{}, false, nil
	}
	rest := line[i+len(xidMarker):]

	busEnd := strings.Index(rest, "):")
	if busEnd < 0 {
		return Event{}, false, errors.New("xid line: no \"):\" after the PCI bus id")
	}
	bus, err := NormalizePCIBusID(rest[:busEnd])
	if err != nil {
		return Event{}, false, fmt.Errorf("xid line: %w", err)
	}
	ev.PCIBusID = bus
	rest = strings.TrimLeft(rest[busEnd+len("):"):], " ")

	codeText, rest := nextField(rest)
	code, err := strconv.Atoi(codeText)
	if !isDigits(codeText) || err != nil || code <= 0 {
		return Event{}, false, fmt.Errorf("xid line: code %q is not a positive number", truncate(codeText))
	}
	ev.Code = code

	if v, ok := strings.CutPrefix(rest, "pid="); ok {
		var pid string
		pid, rest = nextField(v)
		ev.PID = parsePID(pid)
	}
	if v, ok := strings.CutPrefix(rest, "name="); ok {
		var name string
		name, rest = nextField(v)
		if !isUnknown(name) {
			ev.ProcessName = name
		}
	}
	ev.Message = strings.TrimSpace(rest)
	return ev, true, nil
}

// nextField splits s at the first ", " (the driver's field separator), or
// at a bare "," at the very end; with neither, s is the last field.
func nextField(s string) (field, rest string) {
	if i := strings.Index(s, ", "); i >= 0 {
		return s[:i], s[i+2:]
	}
	if i := strings.IndexByte(s, ','); i >= 0 && strings.TrimSpace(s[i+1:]) == "" {
		return s[:i], ""
	}
	return strings.TrimSpace(s), ""
}

// parsePID reads pid=2024380 or pid='<unknown>'; anything else is 0.
func parsePID(s string) int {
	s = strings.Trim(s, "'\"")
	if !isDigits(s) {
		return 0
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 || pid > 1<<31-1 {
		return 0
	}
	return pid
}

func isUnknown(s string) bool {
	s = strings.Trim(s, "'\"")
	return s == "" || s == "<unknown>"
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// truncate keeps error messages about hostile input short.
func truncate(s string) string {
	const limit = 40
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// NormalizePCIBusID turns the bus ids the kernel log uses (PCI:0000:9b:00,
// 0000:9b:00, 9b:00, with or without a .function) into NVML's long form with
// an 8-digit domain and lower-case hex: 00000000:9b:00.0. NVML itself reports
// upper-case hex (00000000:9B:00.0), so compare the two after passing both
// through this function.
func NormalizePCIBusID(s string) (string, error) {
	orig := s
	s = strings.TrimSpace(s)
	if len(s) >= 4 && strings.EqualFold(s[:4], "PCI:") {
		s = s[4:]
	}
	function := "0"
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		function = s[dot+1:]
		s = s[:dot]
	}
	parts := strings.Split(s, ":")
	domain := "0"
	switch len(parts) {
	case 2: // bus:device, domain 0
	case 3:
		domain, parts = parts[0], parts[1:]
	default:
		return "", fmt.Errorf("PCI bus id %q: want [domain:]bus:device[.function]", truncate(orig))
	}
	d, err1 := parseHex(domain, 8, 0xffffffff)
	b, err2 := parseHex(parts[0], 2, 0xff)
	dev, err3 := parseHex(parts[1], 2, 0x1f)
	fn, err4 := parseHex(function, 1, 7)
	if err := cmp.Or(err1, err2, err3, err4); err != nil {
		return "", fmt.Errorf("PCI bus id %q: %w", truncate(orig), err)
	}
	return fmt.Sprintf("%08x:%02x:%02x.%x", d, b, dev, fn), nil
}

// parseHex reads 1 to maxDigits hex digits no larger than maxValue.
func parseHex(s string, maxDigits int, maxValue uint64) (uint64, error) {
	if s == "" || len(s) > maxDigits {
		return 0, fmt.Errorf("%q is not 1 to %d hex digits", truncate(s), maxDigits)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v > maxValue {
		return 0, fmt.Errorf("%q is not a hex number up to %#x", s, maxValue)
	}
	return v, nil
}
