package model

import (
	"math"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestCatalogueIsConsistent(t *testing.T) {
	ids := map[FieldID]bool{}
	names := map[string]bool{}
	type series struct{ metric, key, value string }
	seen := map[series]FieldID{}
	for _, f := range Catalogue {
		if ids[f.ID] {
			t.Errorf("field id %d listed twice", f.ID)
		}
		ids[f.ID] = true
		if names[f.Name] {
			t.Errorf("field name %s listed twice", f.Name)
		}
		names[f.Name] = true
		if got, ok := FieldByID(f.ID); !ok || got.Name != f.Name {
			t.Errorf("FieldByID(%d) = %v, %v", f.ID, got, ok)
		}
		if got, ok := FieldByName(f.Name); !ok || got.ID != f.ID {
			t.Errorf("FieldByName(%s) = %v, %v", f.Name, got, ok)
		}
		if f.Profiling != strings.HasPrefix(f.Name, "DCGM_FI_PROF_") {
			t.Errorf("%s: Profiling = %v, but the name says otherwise", f.Name, f.Profiling)
		}
		if f.Kind == Label {
			continue
		}
		if f.OTel == "" || f.Scale == 0 {
			t.Errorf("%s: no OTel name or scale", f.Name)
		}
		// Two fields may share a metric only when an attribute tells them apart.
		s := series{f.OTel, f.AttrKey, f.AttrValue}
		if other, dup := seen[s]; dup {
			t.Errorf("%s and field %d both become %v", f.Name, other, s)
		}
		seen[s] = f.ID
	}
	if _, ok := FieldByName("DCGM_FI_DEV_CLOCKS_EVENT_REASONS"); !ok {
		t.Error("the newer name of the throttle-reasons field is not an alias")
	}
}

func TestSentinels(t *testing.T) {
	for _, v := range []int64{Int64Blank, Int64Blank + 1, Int64Blank + 2, Int64Blank + 3, math.MaxInt64, 9223372036854775794} {
		if !IsBlankInt64(v) {
			t.Errorf("IsBlankInt64(%d) = false", v)
		}
	}
	for _, v := range []int64{0, 1, 4742776, Int64Blank - 1} {
		if IsBlankInt64(v) {
			t.Errorf("IsBlankInt64(%d) = true for a real value", v)
		}
	}
	for _, v := range []float64{Float64Blank, Float64Blank + 2, math.NaN(), math.Inf(1)} {
		if !IsBlankFloat64(v) {
			t.Errorf("IsBlankFloat64(%v) = false", v)
		}
	}
	if IsBlankFloat64(412.5) {
		t.Error("IsBlankFloat64(412.5) = true")
	}
}

func TestOwnerIsZero(t *testing.T) {
	if !(Owner{}).IsZero() || (Owner{SlurmJobID: "1"}).IsZero() {
		t.Error("Owner.IsZero is wrong")
	}
	if (Value{Int: 3}).AsFloat() != 3 || (Value{Float: 2.5, IsFloat: true}).AsFloat() != 2.5 {
		t.Error("Value.AsFloat is wrong")
	}
}
