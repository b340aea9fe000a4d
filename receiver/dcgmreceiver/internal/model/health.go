package model

import "time"

// HealthResult is what a health watch reports, in DCGM's order: the worse
// result compares greater.
type HealthResult int

const (
	HealthPass HealthResult = iota
	HealthWarn
	HealthFail
)

// String returns the result as the receiver writes it: pass, warn or fail.
func (r HealthResult) String() string {
	switch r {
	case HealthWarn:
		return "warn"
	case HealthFail:
		return "fail"
	}
	return "pass"
}

// HealthIncident is one problem a health watch reports: on a GPU, or, for
// the NVSwitch systems, on an NVSwitch (OnNVSwitch set, GPU empty).
type HealthIncident struct {
	GPU        GPU
	OnNVSwitch bool
	NVSwitch   uint // DCGM's entity id of the NVSwitch
	// System is the watched system, one of semconv.HealthSystem*.
	System string
	Result HealthResult // HealthWarn or HealthFail
	// Code is DCGM's error code (dcgmError_t) and CodeName its name
	// (DCGM_FR_*); Message is DCGM's text.
	Code     int
	CodeName string
	Message  string
}

// Key identifies the incident across checks: where it is, its system and
// its code. The message (which often carries a count) is not part of it.
type HealthKey struct {
	GPU        string // the GPU's UUID, or its index when DCGM named none
	OnNVSwitch bool
	NVSwitch   uint
	System     string
	Code       int
}

// Key returns the incident's key; gpuKey names the GPU.
func (i HealthIncident) Key(gpuKey string) HealthKey {
	return HealthKey{GPU: gpuKey, OnNVSwitch: i.OnNVSwitch, NVSwitch: i.NVSwitch, System: i.System, Code: i.Code}
}

// HealthReport is what one check of the health watches returns.
type HealthReport struct {
	Time time.Time
	// GPUs are the GPUs watched; GPUSystems the systems watched on each.
	GPUs       []GPU
	GPUSystems []string
	// NVSwitches are the NVSwitches watched (none where the node has none,
	// or DCGM refused their watches); NVSwitchSystems the systems watched
	// on each.
	NVSwitches      []uint
	NVSwitchSystems []string
	// Incidents are every warning and failure the watches report now.
	Incidents []HealthIncident
	// Baseline is set when the report says nothing of the incidents: on
	// the first check after the watches were set (at start, and again
	// after a reconnect), when DCGM records the state to compare with and
	// reports nothing, and while DCGM lists no GPU. No incident may then be
	// taken as cleared.
	Baseline bool
}
