package kmsg

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Record is one /dev/kmsg record (Documentation/ABI/testing/dev-kmsg):
//
//	<prio>,<seq>,<usec since boot>,<flags>[,more];<message>\n
//	 KEY=value\n   (optional dictionary lines, each starting with a space)
type Record struct {
	Facility int // syslog facility: 0 is the kernel, 1 user space (echo > /dev/kmsg)
	Level    int // syslog level 0 (emerg) to 7 (debug)
	Seq      uint64
	// SinceBoot is the kernel's monotonic timestamp of the record.
	SinceBoot time.Duration
	// Message with the kernel's \xNN escapes decoded.
	Message string
	// Dict holds the dictionary lines (SUBSYSTEM=pci, DEVICE=+pci:...), nil
	// when there are none.
	Dict map[string]string
}

// ParseRecord parses one record: a header line and any dictionary lines
// after it. Bytes after the header line that do not start with a space are
// ignored (they would be the next record).
func ParseRecord(b []byte) (Record, error) {
	line, rest, _ := bytes.Cut(b, []byte{'\n'})
	header, msg, found := bytes.Cut(line, []byte{';'})
	if !found {
		return Record{}, errors.New("kmsg record: no ';' between header and message")
	}
	// prio,seq,usec,flags and possibly more fields (caller=T123, ...).
	fields := bytes.SplitN(header, []byte{','}, 5)
	if len(fields) < 4 {
		return Record{}, fmt.Errorf("kmsg record: header %q has %d fields, want at least 4", truncate(string(header)), len(fields))
	}
	prio, err := strconv.ParseUint(string(fields[0]), 10, 31)
	if err != nil {
		return Record{}, fmt.Errorf("kmsg record: priority %q is not a number", truncate(string(fields[0])))
	}
	seq, err := strconv.ParseUint(string(fields[1]), 10, 64)
	if err != nil {
		return Record{}, fmt.Errorf("kmsg record: sequence %q is not a number", truncate(string(fields[1])))
	}
	usec, err := strconv.ParseUint(string(fields[2]), 10, 64)
	if err != nil || usec > math.MaxInt64/uint64(time.Microsecond) {
		return Record{}, fmt.Errorf("kmsg record: timestamp %q is not a number of microseconds", truncate(string(fields[2])))
	}
	r := Record{
		Facility:  int(prio >> 3),
		Level:     int(prio & 7),
		Seq:       seq,
		SinceBoot: time.Duration(usec) * time.Microsecond,
		Message:   unescape(msg),
	}
	for len(rest) > 0 && rest[0] == ' ' {
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if k, v, ok := bytes.Cut(line[1:], []byte{'='}); ok && len(k) > 0 {
			if r.Dict == nil {
				r.Dict = make(map[string]string, 2)
			}
			r.Dict[string(k)] = unescape(v)
		}
	}
	return r, nil
}

// unescape decodes the \xNN escapes /dev/kmsg uses for non-printable bytes
// and for the backslash itself. Anything else is kept as it is.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && b[i+1] == 'x' {
			if hi, lo := unhex(b[i+2]), unhex(b[i+3]); hi >= 0 && lo >= 0 {
				out = append(out, byte(hi<<4|lo))
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
