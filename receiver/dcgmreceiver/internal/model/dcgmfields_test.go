package model

import "testing"

// The catalogue's ids and the generated table must agree: a field listed in
// a counters CSV by its DCGM name gets the catalogue's metric only if so.
func TestCatalogueAgreesWithDCGMTable(t *testing.T) {
	for _, f := range Catalogue {
		id, ok := dcgmFieldIDs[f.Name]
		if !ok {
			// DCGM renamed the throttle reasons; the catalogue keeps the
			// name dcgm-exporter's dashboards use and aliases the new one.
			id, ok = dcgmFieldIDs["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]
			if f.ID != FieldClocksEventReasons || !ok {
				t.Errorf("catalogue field %s (id %d) is not in go-dcgm's table", f.Name, f.ID)
				continue
			}
		}
		if id != f.ID {
			t.Errorf("catalogue field %s has id %d, go-dcgm says %d", f.Name, f.ID, id)
		}
	}
}

func TestFieldIDByName(t *testing.T) {
	for name, want := range map[string]FieldID{
		"DCGM_FI_DEV_GPU_TEMP":             FieldGPUTemp,
		"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": FieldClocksEventReasons,
		"DCGM_FI_DEV_FAN_SPEED":            191, // outside the catalogue
		"DCGM_FI_DEV_BAR1_USED":            92,
	} {
		if got, ok := FieldIDByName(name); !ok || got != want {
			t.Errorf("FieldIDByName(%s) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "DCGM_FI_DEV_NO_SUCH_FIELD", "dcgm_fi_dev_gpu_temp"} {
		if id, ok := FieldIDByName(name); ok {
			t.Errorf("FieldIDByName(%q) = %d, want not found", name, id)
		}
	}
	if got := OTelNameOf("DCGM_FI_DEV_FAN_SPEED"); got != "gpu.dcgm.dev_fan_speed" {
		t.Errorf("OTelNameOf = %s", got)
	}
}

func TestFieldIDsByNumber(t *testing.T) {
	for in, want := range map[string]FieldID{"1": 1, "150": FieldGPUTemp, "65535": 65535} {
		if got, ok := ParseFieldID(in); !ok || got != want {
			t.Errorf("ParseFieldID(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "0", "065", "65536", "99999999999999999999", "-1", "+1", "1e3", " 1", "1 "} {
		if id, ok := ParseFieldID(in); ok {
			t.Errorf("ParseFieldID(%q) = %d, want refused", in, id)
		}
	}
	for id, want := range map[FieldID]string{
		FieldGPUTemp:            "DCGM_FI_DEV_GPU_TEMP",
		FieldClocksEventReasons: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", // the catalogue's name (DCGM's current one)
		191:                     "DCGM_FI_DEV_FAN_SPEED",
		1600:                    "DCGM_FI_1600",
	} {
		if got := FieldNameOf(id); got != want {
			t.Errorf("FieldNameOf(%d) = %s, want %s", id, got, want)
		}
		if back, ok := FieldIDByName(want); !ok || back != id {
			t.Errorf("FieldIDByName(%s) = %d, %v; want %d", want, back, ok, id)
		}
	}
}
