package kmsg

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg/kmsgtest"
)

// escapeKmsg escapes a message the way the kernel does for /dev/kmsg:
// control bytes, bytes >= 127 and the backslash become \xNN.
func escapeKmsg(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < ' ' || c >= 127 || c == '\\' {
			fmt.Fprintf(&b, `\x%02x`, c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// formatRecord writes r as /dev/kmsg would.
func formatRecord(r Record) string {
	return fmt.Sprintf("%d,%d,%d,-;%s\n", r.Facility<<3|r.Level, r.Seq, r.SinceBoot/time.Microsecond, escapeKmsg(r.Message))
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Record
	}{
		{
			name: "kernel record",
			in:   "4,1290,6023512345,-;NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n",
			want: Record{Facility: 0, Level: 4, Seq: 1290, SinceBoot: 6023512345 * time.Microsecond, Message: "NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus."},
		},
		{
			name: "dictionary lines, as in Documentation/ABI/testing/dev-kmsg",
			in:   "7,160,424069,-;pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7] (ignored)\n SUBSYSTEM=acpi\n DEVICE=+acpi:PNP0A03:00\n",
			want: Record{Level: 7, Seq: 160, SinceBoot: 424069 * time.Microsecond, Message: "pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7] (ignored)",
				Dict: map[string]string{"SUBSYSTEM": "acpi", "DEVICE": "+acpi:PNP0A03:00"}},
		},
		{
			name: "escapes, user facility, no trailing newline",
			in:   `12,223,1234567,-;foo\x0abar\x5cbaz \xZZ \x4`,
			want: Record{Facility: 1, Level: 4, Seq: 223, SinceBoot: 1234567 * time.Microsecond, Message: "foo\nbar\\baz \\xZZ \\x4"},
		},
		{
			name: "extra header fields (caller id), continuation flag",
			in:   "6,339,5140900,c,caller=T1234;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n",
			want: Record{Level: 6, Seq: 339, SinceBoot: 5140900 * time.Microsecond, Message: "NVRM: loading NVIDIA UNIX x86_64 Kernel Module"},
		},
		{
			name: "next record after the header line is not this one's",
			in:   "6,1,2,-;first\n6,2,3,-;second\n",
			want: Record{Level: 6, Seq: 1, SinceBoot: 2 * time.Microsecond, Message: "first"},
		},
		{
			name: "semicolons in the message",
			in:   "6,1,2,-;a;b\n",
			want: Record{Level: 6, Seq: 1, SinceBoot: 2 * time.Microsecond, Message: "a;b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRecord([]byte(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseRecordMalformed(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{"", "no ';'"},
		{"[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, x", "no ';'"},
		{"6,1,2;msg", "has 3 fields, want at least 4"},
		{"x,1,2,-;msg", `priority "x"`},
		{"-6,1,2,-;msg", `priority "-6"`},
		{"6,one,2,-;msg", `sequence "one"`},
		{"6,1,2.5,-;msg", `timestamp "2.5"`},
		{"6,1,18446744073709551615,-;msg", `timestamp "18446744073709551615"`}, // would overflow a Duration
		{"6,1,,-;msg", `timestamp ""`},
	}
	for _, tt := range tests {
		_, err := ParseRecord([]byte(tt.in))
		require.Error(t, err, tt.in)
		assert.Contains(t, err.Error(), tt.wantErr, tt.in)
		assert.True(t, strings.HasPrefix(err.Error(), "kmsg record: "), err.Error())
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Facility: 0, Level: 3, Seq: 77, SinceBoot: 42 * time.Second, Message: "tab\there \\ back\x7f\xff"}
	got, err := ParseRecord([]byte(formatRecord(r)))
	require.NoError(t, err)
	assert.Equal(t, r, got)
}

func FuzzParseRecord(f *testing.F) {
	for i, line := range fixtureLines(f) {
		_, msg, _ := kmsgtest.ParseDmesgLine(line, time.UTC)
		f.Add([]byte(formatRecord(Record{Level: 4, Seq: uint64(i), SinceBoot: time.Duration(i) * time.Second, Message: msg})))
	}
	f.Add([]byte("7,160,424069,-;pci_root PNP0A03:00: host bridge window\n SUBSYSTEM=acpi\n DEVICE=+acpi:PNP0A03:00\n"))
	f.Add([]byte(`12,223,1234567,-;foo\x0abar\x5c`))
	f.Add([]byte("6,339,5140900,c,caller=T1234;x\n =\n k\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseRecord(in)
		if err != nil {
			return
		}
		if r.Level < 0 || r.Level > 7 || r.Facility < 0 || r.SinceBoot < 0 {
			t.Fatalf("record out of range: %+v", r)
		}
		// What parses must survive being written out again.
		again, err := ParseRecord([]byte(formatRecord(r)))
		if err != nil {
			t.Fatalf("re-parsing %+v: %v", r, err)
		}
		r.Dict = nil
		if again.Facility != r.Facility || again.Level != r.Level || again.Seq != r.Seq ||
			again.SinceBoot != r.SinceBoot || again.Message != r.Message {
			t.Fatalf("round trip changed %+v into %+v", r, again)
		}
	})
}
