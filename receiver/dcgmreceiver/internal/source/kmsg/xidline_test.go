package kmsg

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg/kmsgtest"
)

const fixturePath = "testdata/gpud_dmesg-with-xid-119.log"

// fixtureLines returns the lines of the real kernel log fixture.
func fixtureLines(t testing.TB) []string {
	t.Helper()
	f, err := os.Open(fixturePath)
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	return lines
}

// The five XIDs of the fixture, in order.
var fixtureXIDs = []Event{
	{"00000000:9b:00.0", 119, 2024380, "nvidia-smi", "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."},
	{"00000000:9b:00.0", 119, 2024380, "nvidia-smi", "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 10 (FREE) (0xa55a0210 0x0)."},
	{"00000000:9b:00.0", 119, 2024380, "nvidia-smi", "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 10 (FREE) (0xa55a0090 0x0)."},
	{"00000000:9b:00.0", 119, 1263500, "cache_mgr_main", "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801813 0x4c)."},
	{"00000000:9b:00.0", 119, 1240590, "gpud", "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20803032 0x58c)."},
}

// The times of fixtureXIDs as dmesg -T printed them.
var fixtureXIDTimes = []time.Time{
	time.Date(2025, 2, 23, 16, 24, 18, 0, time.UTC),
	time.Date(2025, 2, 23, 16, 24, 24, 0, time.UTC),
	time.Date(2025, 2, 23, 16, 24, 30, 0, time.UTC),
	time.Date(2025, 2, 23, 16, 27, 12, 0, time.UTC),
	time.Date(2025, 2, 23, 16, 30, 13, 0, time.UTC),
}

func TestParseXIDLineFixture(t *testing.T) {
	lines := fixtureLines(t)
	require.Len(t, lines, 43)
	var got []Event
	var times []time.Time
	nonXID := 0
	for i, line := range lines {
		at, msg, ok := kmsgtest.ParseDmesgLine(line, time.UTC)
		require.True(t, ok, "line %d has a dmesg -T time", i+1)
		ev, ok, err := ParseXIDLine(msg)
		require.NoError(t, err, "line %d", i+1)
		if !ok {
			nonXID++
			assert.Equal(t, Event{}, ev, "line %d", i+1)
			continue
		}
		got = append(got, ev)
		times = append(times, at)
	}
	assert.Equal(t, fixtureXIDs, got)
	assert.Equal(t, fixtureXIDTimes, times)
	assert.Equal(t, 38, nonXID, "every other line (GPU serial, RPC history) is ignored")
}

func TestParseXIDLineVariants(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Event
	}{
		{
			name: "older driver without pid and name",
			line: "NVRM: Xid (0000:9b:00): 79, GPU has fallen off the bus.",
			want: Event{PCIBusID: "00000000:9b:00.0", Code: 79, Message: "GPU has fallen off the bus."},
		},
		{
			name: "pid unknown in quotes, name unknown",
			line: "NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.",
			want: Event{PCIBusID: "00000000:3b:00.0", Code: 48, Message: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0."},
		},
		{
			name: "pid without name",
			line: "NVRM: Xid (PCI:0000:01:00): 43, pid=4112, Ch 00000010",
			want: Event{PCIBusID: "00000000:01:00.0", Code: 43, PID: 4112, Message: "Ch 00000010"},
		},
		{
			name: "pid and name, commas in the message",
			line: "NVRM: Xid (PCI:0000:18:00): 31, pid=25383, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f5d_c0000000.",
			want: Event{PCIBusID: "00000000:18:00.0", Code: 31, PID: 25383, ProcessName: "python", Message: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f5d_c0000000."},
		},
		{
			name: "code alone",
			line: "NVRM: Xid (PCI:0000:9b:00): 79",
			want: Event{PCIBusID: "00000000:9b:00.0", Code: 79},
		},
		{
			name: "code with trailing comma",
			line: "NVRM: Xid (PCI:0000:9b:00): 79,",
			want: Event{PCIBusID: "00000000:9b:00.0", Code: 79},
		},
		{
			name: "upper-case hex, function given, syslog prefix",
			line: "Feb 23 16:24:18 node7 kernel: [812345.678901] NVRM: Xid (PCI:0001:9B:1f.3): 94, pid=7, name=pt_main_thread, Contained: SM (0x1). RST: No, D-RST: No",
			want: Event{PCIBusID: "00000001:9b:1f.3", Code: 94, PID: 7, ProcessName: "pt_main_thread", Message: "Contained: SM (0x1). RST: No, D-RST: No"},
		},
		{
			name: "trailing whitespace dropped",
			line: "NVRM: Xid (PCI:0000:9b:00): 13, Graphics Exception \r",
			want: Event{PCIBusID: "00000000:9b:00.0", Code: 13, Message: "Graphics Exception"},
		},
		{
			name: "pid not a number is left unknown",
			line: "NVRM: Xid (PCI:0000:9b:00): 13, pid=abc, name=x, msg",
			want: Event{PCIBusID: "00000000:9b:00.0", Code: 13, ProcessName: "x", Message: "msg"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ParseXIDLine(tt.line)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseXIDLineNotXID(t *testing.T) {
	for _, line := range []string{
		"",
		"NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error",
		"NVRM: Xid is a word in this sentence",
		"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.105.08",
	} {
		ev, ok, err := ParseXIDLine(line)
		require.NoError(t, err, line)
		assert.False(t, ok, line)
		assert.Equal(t, Event{}, ev)
	}
}

func TestParseXIDLineMalformed(t *testing.T) {
	tests := []struct{ line, wantErr string }{
		{"NVRM: Xid (PCI:0000:9b:00): abc, pid=1, name=x, msg", `code "abc" is not a positive number`},
		{"NVRM: Xid (PCI:0000:9b:00): , msg", `code "" is not a positive number`},
		{"NVRM: Xid (PCI:0000:9b:00): 0, msg", `code "0"`},
		{"NVRM: Xid (PCI:0000:9b:00): -79, msg", `code "-79"`},
		{"NVRM: Xid (PCI:0000:9b:00): +79, msg", `code "+79"`},
		{"NVRM: Xid (PCI:0000:9b:00): 99999999999999999999999, msg", `code "99999999999999999999999"`},
		{"NVRM: Xid (PCI:0000:9b:00) 79, msg", `no "):" after the PCI bus id`},
		{"NVRM: Xid (PCI:zz:9b:00): 79, msg", `PCI bus id "PCI:zz:9b:00"`},
		{"NVRM: Xid (GPU-509665ad): 79, msg", `PCI bus id "GPU-509665ad"`},
		{"NVRM: Xid (PCI:0000:9b:00:00:00): 79, msg", `want [domain:]bus:device[.function]`},
	}
	for _, tt := range tests {
		ev, ok, err := ParseXIDLine(tt.line)
		require.Error(t, err, tt.line)
		assert.Contains(t, err.Error(), tt.wantErr)
		assert.False(t, ok)
		assert.Equal(t, Event{}, ev)
	}
}

func TestNormalizePCIBusID(t *testing.T) {
	for in, want := range map[string]string{
		"PCI:0000:9b:00":   "00000000:9b:00.0",
		"pci:0000:9b:00":   "00000000:9b:00.0",
		"0000:9b:00":       "00000000:9b:00.0",
		"9b:00":            "00000000:9b:00.0",
		"00000000:9B:00.0": "00000000:9b:00.0", // NVML's own form, upper-case
		"0001:3b:1f.7":     "00000001:3b:1f.7",
		"ffffffff:ff:1f.7": "ffffffff:ff:1f.7",
		" 0:1:2 ":          "00000000:01:02.0",
	} {
		got, err := NormalizePCIBusID(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{
		"", "PCI:", "9b", "0000:9b:00:00", "100000000:9b:00.0", "0000:100:00.0",
		"0000:9b:20.0", // device is 5 bits
		"0000:9b:00.8", // function is 3 bits
		"0000:9b:00.", "0000::00", "0x0:9b:00", "0000:-1:00", "0000:9b:00.0.0",
	} {
		_, err := NormalizePCIBusID(bad)
		assert.Error(t, err, bad)
	}
}

var longBusID = regexp.MustCompile(`^[0-9a-f]{8}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)

func FuzzParseXIDLine(f *testing.F) {
	for _, line := range fixtureLines(f) {
		f.Add(line)
		if _, msg, ok := kmsgtest.ParseDmesgLine(line, time.UTC); ok {
			f.Add(msg)
		}
	}
	f.Add("NVRM: Xid (0000:9b:00): 79, GPU has fallen off the bus.")
	f.Add("NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.")
	f.Add("NVRM: Xid (PCI:0000:9b:00): 79,")
	f.Add("NVRM: Xid (PCI:0000:9b:00.0): 13, pid=1, name=a, ")
	f.Fuzz(func(t *testing.T, line string) {
		ev, ok, err := ParseXIDLine(line)
		if err != nil {
			if ok || ev != (Event{}) {
				t.Fatalf("error %v came with ok=%v ev=%+v", err, ok, ev)
			}
			if !strings.Contains(line, xidMarker) {
				t.Fatalf("error %v for a line without the marker", err)
			}
			return
		}
		if !ok {
			if ev != (Event{}) {
				t.Fatalf("not an XID but ev=%+v", ev)
			}
			return
		}
		if ev.Code <= 0 || ev.PID < 0 {
			t.Fatalf("code %d pid %d", ev.Code, ev.PID)
		}
		if !longBusID.MatchString(ev.PCIBusID) {
			t.Fatalf("bus id %q is not in the long form", ev.PCIBusID)
		}
		if again, err := NormalizePCIBusID(ev.PCIBusID); err != nil || again != ev.PCIBusID {
			t.Fatalf("normalising %q again gave %q, %v", ev.PCIBusID, again, err)
		}
		if ev.Message != strings.TrimSpace(ev.Message) {
			t.Fatalf("message %q not trimmed", ev.Message)
		}
	})
}
