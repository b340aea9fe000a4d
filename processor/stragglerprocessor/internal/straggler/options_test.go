package straggler

import (
	"math"
	"strings"
	"testing"
)

func TestZeroOptionsAreTheDefaults(t *testing.T) {
	if got := (Options{}).withDefaults(); got != DefaultOptions() {
		t.Errorf("zero options = %+v, want the defaults %+v", got, DefaultOptions())
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options must validate: %v", err)
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("default options must validate: %v", err)
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	cases := map[string]Options{
		"rule":           {Rule: "median"},
		"factor":         {Factor: 0.5},
		"z_threshold":    {ZThreshold: math.NaN()},
		"min_excess":     {MinExcess: -0.1},
		"mad_floor":      {MADFloor: math.Inf(1)},
		"min_group_size": {MinGroupSize: -1},
	}
	for field, o := range cases {
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), field) || !strings.HasPrefix(err.Error(), "straggler: options: ") {
			t.Errorf("%+v: error %v, want one naming %s", o, err, field)
		}
	}
}

// DecideStep must never run on an unusable value, even unvalidated.
func TestWithDefaultsReplacesUnusableValues(t *testing.T) {
	o := Options{Rule: "nonsense", Factor: math.NaN(), ZThreshold: math.Inf(1), MinExcess: -1, MADFloor: math.NaN(), MinGroupSize: -4}
	if got := o.withDefaults(); got != DefaultOptions() {
		t.Errorf("withDefaults(%+v) = %+v, want the defaults", o, got)
	}
	custom := Options{Rule: RuleBoth, Factor: 3, ZThreshold: 5, MinExcess: 0.5, MADFloor: 0.02, MinGroupSize: 8}
	if got := custom.withDefaults(); got != custom {
		t.Errorf("withDefaults changed usable values: %+v -> %+v", custom, got)
	}
}
