package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// dcgmHealthRules is what defaults.yaml says of each DCGM health-watch
// incident (by its DCGM_FR_* name): the rule, fault type, severity and
// action, and whether the rule is on the node (NVSwitch incidents carry no
// GPU).
var dcgmHealthRules = []struct {
	code     string
	rule     string
	faultT   fault.Type
	severity fault.Severity
	action   fault.Action
	node     bool
}{
	{"DCGM_FR_VOLATILE_DBE_DETECTED", "dcgm_health_dbe", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionCordon, false},
	{"DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS", "dcgm_health_dbe", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionCordon, false},
	{"DCGM_FR_UNCONTAINED_ERROR", "dcgm_health_dbe", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionCordon, false},
	{"DCGM_FR_ROW_REMAP_FAILURE", "dcgm_health_row_remap_failure", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionRMAReview, false},
	{"DCGM_FR_UNCORRECTABLE_ROW_REMAP", "dcgm_health_row_remap_failure", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionRMAReview, false},
	{"DCGM_FR_NVLINK_DOWN", "dcgm_health_nvlink_down", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, false},
	{"DCGM_FR_NVLINK_ERROR_CRITICAL", "dcgm_health_nvlink_down", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, false},
	{"DCGM_FR_NVSWITCH_FATAL_ERROR", "dcgm_health_nvswitch_fatal", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, true},
	{"DCGM_FR_NVSWITCH_DOWN", "dcgm_health_nvswitch_fatal", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, true},
	{"DCGM_FR_PENDING_PAGE_RETIREMENTS", "dcgm_health_pending_retirement", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionResetGPU, false},
	{"DCGM_FR_PENDING_ROW_REMAP", "dcgm_health_pending_retirement", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionResetGPU, false},
	{"DCGM_FR_RETIRED_PAGES_LIMIT", "dcgm_health_retired_pages_limit", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionRMAReview, false},
	{"DCGM_FR_RETIRED_PAGES_DBE_LIMIT", "dcgm_health_retired_pages_limit", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionRMAReview, false},
	{"DCGM_FR_NVLINK_ERROR_THRESHOLD", "dcgm_health_nvlink_errors", fault.TypeNVLinkDegraded, fault.SeverityP2, fault.ActionCordon, false},
	{"DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD", "dcgm_health_nvlink_errors", fault.TypeNVLinkDegraded, fault.SeverityP2, fault.ActionCordon, false},
	{"DCGM_FR_CLOCKS_EVENT_THERMAL", "dcgm_health_thermal", fault.TypeGPUThermal, fault.SeverityP2, fault.ActionNone, false},
	{"DCGM_FR_THERMAL_VIOLATIONS", "dcgm_health_thermal", fault.TypeGPUThermal, fault.SeverityP2, fault.ActionNone, false},
	{"DCGM_FR_THERMAL_VIOLATIONS_TS", "dcgm_health_thermal", fault.TypeGPUThermal, fault.SeverityP2, fault.ActionNone, false},
	{"DCGM_FR_TEMP_VIOLATION", "dcgm_health_thermal", fault.TypeGPUThermal, fault.SeverityP2, fault.ActionNone, false},
	{"DCGM_FR_PCI_REPLAY_RATE", "dcgm_health_pcie_replays", fault.TypeGPUPCIeDegraded, fault.SeverityP3, fault.ActionNone, false},
	{"DCGM_FR_VOLATILE_SBE_DETECTED", "dcgm_health_sbe", fault.TypeGPUECCSBERate, fault.SeverityP3, fault.ActionRMAReview, false},
	{"DCGM_FR_CLOCKS_EVENT_POWER", "dcgm_health_power", fault.TypeGPUPower, fault.SeverityP3, fault.ActionNone, false},
	{"DCGM_FR_POWER_UNREADABLE", "dcgm_health_power", fault.TypeGPUPower, fault.SeverityP3, fault.ActionNone, false},
	{"DCGM_FR_NVSWITCH_NON_FATAL_ERROR", "dcgm_health_nvswitch_nonfatal", fault.TypeNVLinkDegraded, fault.SeverityP3, fault.ActionNone, true},
	{"DCGM_FR_CORRUPT_INFOROM", "dcgm_health_inforom", fault.TypeGPUInforom, fault.SeverityP3, fault.ActionRMAReview, false},
}

func healthIncidentSignal(code string) string {
	return semconv.EventGPUHealthIncident + "{" + semconv.AttrGPUHealthErrorName + "=" + code + "}"
}

// addDCGMHealthCases adds each health rule's case to the default cases:
// its first incident fires it; an incident of a code it does not name,
// and the same code under another selector, do not.
func addDCGMHealthCases(cases map[string]ruleCase) {
	for _, h := range dcgmHealthRules {
		if _, done := cases[h.rule]; done {
			continue
		}
		ent := gpuG
		if h.node {
			ent = nodeN
		}
		incident := "memory fail " + h.code + ": DCGM's message"
		cases[h.rule] = ruleCase{ent, text(healthIncidentSignal(h.code), incident, 60), [][]obs{
			text(healthIncidentSignal("DCGM_FR_UNKNOWN"), "memory fail DCGM_FR_UNKNOWN", 60),
			text(semconv.EventGPUHealthIncident+"{"+semconv.AttrGPUHealthSystem+"="+h.code+"}", incident, 60),
		}}
	}
}

// Every incident kind of the table opens the fault defaults.yaml gives it,
// quoting the incident as its evidence.
func TestDCGMHealthIncidentsOpenTheirFaults(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	byName := map[string]Rule{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	for _, h := range dcgmHealthRules {
		t.Run(h.code, func(t *testing.T) {
			r, ok := byName[h.rule]
			require.True(t, ok, "rule %s", h.rule)
			assert.Equal(t, h.action, r.Action)
			ent := gpuG
			if h.node {
				ent = nodeN
			}
			incident := "memory fail " + h.code + " (4): Detected 1 volatile double-bit ECC error(s) in GPU 5."
			m, fired := findRule(matchesFor(t, rs, ent, text(healthIncidentSignal(h.code), incident, 60)), h.rule)
			require.True(t, fired)
			assert.Equal(t, h.faultT, m.FaultType)
			assert.Equal(t, h.severity, m.Severity)
			require.Len(t, m.Evidence, 1)
			assert.Equal(t, healthIncidentSignal(h.code), m.Evidence[0].Signal)
			assert.Equal(t, incident, m.Evidence[0].Text)
		})
	}
	// Every health rule of defaults.yaml is in the table.
	for _, r := range rs {
		if len(r.Name) > len("dcgm_health_") && r.Name[:len("dcgm_health_")] == "dcgm_health_" {
			found := false
			for _, h := range dcgmHealthRules {
				found = found || h.rule == r.Name
			}
			assert.True(t, found, "rule %s is not in dcgmHealthRules", r.Name)
		}
	}
}
