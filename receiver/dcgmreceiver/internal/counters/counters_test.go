package counters

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParseFile(t *testing.T) {
	got, err := ParseFile(filepath.Join("testdata", "counters.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Counter{
		{"DCGM_FI_DEV_SM_CLOCK", model.FieldSMClock, model.Gauge, "SM clock frequency (in MHz).", false},
		{"DCGM_FI_DEV_MEM_CLOCK", model.FieldMemClock, model.Gauge, "Memory clock frequency (in MHz).", false},
		{"DCGM_FI_DEV_GPU_TEMP", model.FieldGPUTemp, model.Gauge, "GPU temperature (in C).", false},
		{"DCGM_FI_DEV_GPU_UTIL", model.FieldGPUUtil, model.Gauge, "GPU utilization (in %, sampled).", false},
		{"DCGM_FI_DEV_XID_ERRORS", model.FieldXIDErrors, model.Gauge, "Value of the last XID error encountered.", false},
		{"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", model.FieldPCIeReplayCounter, model.Counter, "Total number of PCIe retries.", false},
		{"DCGM_EXP_XID_ERRORS_COUNT", 0, model.Gauge, "Count of XID errors.", true},
		{"DCGM_FI_DEV_FAN_SPEED", 191, model.Gauge, "Fan speed (in 0-100%).", false},
		{"DCGM_FI_DEV_BAR1_USED", 92, model.Gauge, "Used BAR1 (in MiB).", false},
		{"DCGM_FI_PROF_PIPE_INT_ACTIVE", 1016, model.Gauge, "Ratio of cycles the integer pipe is active.", false},
		{"DCGM_FI_DRIVER_VERSION", model.FieldDriverVersion, model.Label, "Driver Version", false},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d counters, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("counter %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Every error names the file, the line and the column of the culprit.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"unknown field", "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_NOPE, gauge, x\n", `c.csv:2:1: "DCGM_FI_DEV_NOPE" is not a DCGM field name`},
		{"bad type", "DCGM_FI_DEV_GPU_TEMP, histogram, t\n", `c.csv:1:23: type "histogram" of DCGM_FI_DEV_GPU_TEMP is not one of gauge, counter, label`},
		{"columns", "# c\nDCGM_FI_DEV_GPU_TEMP, gauge\n", "c.csv:2:1: want 3 columns"},
		{"duplicate", "DCGM_FI_DEV_GPU_TEMP, gauge, a\n\nDCGM_FI_DEV_GPU_TEMP, gauge, b\n", "c.csv:3:1: DCGM_FI_DEV_GPU_TEMP listed again (first on line 1)"},
		{"string label", "DCGM_FI_DEV_SERIAL, label, s\n", "c.csv:1:21: DCGM_FI_DEV_SERIAL: type label is supported only for DCGM_FI_DRIVER_VERSION"},
		{"exporter metric", "DCGM_EXP_CLOCK_EVENTS_COUNT, gauge, c\n", "c.csv:1:1: DCGM_EXP_CLOCK_EVENTS_COUNT is computed by dcgm-exporter"},
		{"quote", "DCGM_FI_DEV_GPU_TEMP, gauge, \"open\n", "c.csv:1:"},
		{"empty", "# nothing\n\n", "c.csv: lists no fields"},
		{"id zero", "0, gauge, z\n", `c.csv:1:1: "0" is not a DCGM field id`},
		{"id too large", "DCGM_FI_DEV_GPU_TEMP, gauge, t\n65536, gauge, big\n", `c.csv:2:1: "65536" is not a DCGM field id`},
		{"id leading zero", "0150, gauge, t\n", `c.csv:1:1: "0150" is not a DCGM field id`},
		{"id negative", "-1, gauge, t\n", `c.csv:1:1: "-1" is not a DCGM field name`},
		{"duplicate by id", "DCGM_FI_DEV_GPU_TEMP, gauge, a\n150, gauge, b\n", "c.csv:2:1: DCGM_FI_DEV_GPU_TEMP listed again (first on line 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.csv", strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "none.csv"))
	if err == nil || !strings.Contains(err.Error(), "none.csv") {
		t.Fatalf("error = %v, want one naming the file", err)
	}
}

func TestParseRefusesHugeFile(t *testing.T) {
	line := "# " + strings.Repeat("x", 1000) + "\n"
	in := strings.Repeat(line, maxFileSize/len(line)+2)
	_, err := Parse("big.csv", strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "big.csv: larger than") {
		t.Fatalf("error = %v, want the size refused", err)
	}
}

// FuzzParse: no input panics, what is accepted is consistent, and parsing
// allocates a bounded multiple of the input and keeps nothing afterwards.
func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "counters.csv"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("DCGM_FI_DEV_GPU_TEMP, gauge, \"a\"\"b\"\n"))
	f.Add([]byte("\"\n,,,,\n#"))
	f.Add([]byte("191, gauge, fan\n1600, counter, new\nDCGM_FI_1601, gauge, x\n0, gauge, z\n65536, gauge, big\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, err := Parse("f.csv", bytes.NewReader(data))
		runtime.ReadMemStats(&after)
		if grown := after.TotalAlloc - before.TotalAlloc; grown > uint64(64*len(data))+1<<16 {
			t.Fatalf("parsing %d bytes allocated %d bytes", len(data), grown)
		}
		if err != nil {
			if got != nil || !strings.HasPrefix(err.Error(), "f.csv") {
				t.Fatalf("error %q with %d counters: errors must name the file and return nothing", err, len(got))
			}
			return
		}
		ids := map[model.FieldID]bool{}
		for _, c := range got {
			if c.Exporter {
				if c.Name != ExporterXIDCount || c.ID != 0 {
					t.Fatalf("accepted %+v as an exporter series", c)
				}
				continue
			}
			if c.Name != model.FieldNameOf(c.ID) {
				if f, ok := model.FieldByName(c.Name); !ok || f.ID != c.ID {
					t.Fatalf("accepted %+v: a field has one series name, the table's or DCGM_FI_<id>", c)
				}
			}
			if id, ok := model.FieldIDByName(c.Name); !ok || id != c.ID || ids[c.ID] {
				t.Fatalf("accepted %+v: unknown, mismatched or duplicate field", c)
			}
			ids[c.ID] = true
		}
		runtime.GC()
		var kept runtime.MemStats
		runtime.ReadMemStats(&kept)
		if k := int64(kept.HeapAlloc) - int64(before.HeapAlloc); k > int64(16*len(data))+1<<20 {
			t.Fatalf("parsing %d bytes kept %d bytes on the heap", len(data), k)
		}
	})
}

// Any field of go-dcgm's table is accepted by its name, and named as
// listed; a number names the table's field of that id, or, for a field newer
// than the table, DCGM_FI_<id>.
func TestParseAnyFieldOfTheTable(t *testing.T) {
	names := model.DCGMFieldNames()
	if len(names) < 500 {
		t.Fatalf("go-dcgm's table has %d names; want all of them (hundreds)", len(names))
	}
	for _, name := range names {
		kind := "gauge"
		if name == "DCGM_FI_DRIVER_VERSION" {
			kind = "label"
		}
		got, err := Parse("c.csv", strings.NewReader(name+", "+kind+", help of "+name+"\n"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		id, _ := model.FieldIDByName(name)
		if len(got) != 1 || got[0].Name != name || got[0].ID != id || got[0].Help != "help of "+name {
			t.Errorf("%s: got %+v", name, got)
		}
	}
}

func TestParseFieldIDs(t *testing.T) {
	got, err := Parse("c.csv", strings.NewReader("191, gauge, Fan speed.\n150, gauge, Temp.\n1600, counter, A field newer than the table.\nDCGM_FI_1601, gauge, Another.\nDCGM_FI_92, gauge, BAR1.\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Counter{
		{"DCGM_FI_DEV_FAN_SPEED", 191, model.Gauge, "Fan speed.", false},
		{"DCGM_FI_DEV_GPU_TEMP", model.FieldGPUTemp, model.Gauge, "Temp.", false},
		{"DCGM_FI_1600", 1600, model.Counter, "A field newer than the table.", false},
		{"DCGM_FI_1601", 1601, model.Gauge, "Another.", false},
		{"DCGM_FI_DEV_BAR1_USED", 92, model.Gauge, "BAR1.", false},
	}
	if _, known := model.FieldByID(1600); known {
		t.Fatal("the test needs id 1600 outside the catalogue")
	}
	if name := model.FieldNameOf(1600); name != "DCGM_FI_1600" {
		t.Fatalf("id 1600 is in go-dcgm's table as %s now: pick an unused id for this test", name)
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("counter %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
