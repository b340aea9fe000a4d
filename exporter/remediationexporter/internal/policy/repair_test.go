package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// The shipped ladders (README.md, "Repair loop", says why).
func TestDefaultRepairLadders(t *testing.T) {
	p, err := New(Config{})
	require.NoError(t, err)
	reset, reboot := repair.ActionGPUReset, repair.ActionReboot
	diag := func(level int) repair.CheckSpec { return repair.CheckSpec{Check: repair.CheckDiag, Level: level} }
	links := repair.CheckSpec{Check: repair.CheckLinksSteady, Window: 5 * time.Minute}
	for _, tc := range []struct {
		typ    fault.Type
		xid    int
		rule   string
		ladder []repair.Action
		checks []repair.CheckSpec
	}{
		{fault.TypeGPUMemoryDBE, 48, "p1_hardware", []repair.Action{reset, reboot}, []repair.CheckSpec{diag(2)}},
		{fault.TypeGPUXID, 94, "p1_xid_ecc", []repair.Action{reset, reboot}, []repair.CheckSpec{diag(2)}},
		{fault.TypeGPUXID, 48, "p1_xid_ecc", []repair.Action{reset, reboot}, []repair.CheckSpec{diag(2)}},
		{fault.TypeGPUXID, 79, "p1_xid_fell_off_bus", []repair.Action{reboot}, []repair.CheckSpec{diag(1)}},
		{fault.TypeGPUFellOffBus, 79, "p1_fell_off_bus", []repair.Action{reboot}, []repair.CheckSpec{diag(1)}},
		{fault.TypeNVLinkDegraded, 0, "p1_nvlink", []repair.Action{reset, reboot}, []repair.CheckSpec{diag(1), links}},
		{fault.TypeIBLinkFlap, 0, "p1_ib", []repair.Action{reboot}, []repair.CheckSpec{diag(1), links}},
		{fault.TypeGPUUnresponsive, 0, "p1_unresponsive", []repair.Action{reset, reboot}, []repair.CheckSpec{diag(1)}},
	} {
		d := p.Decide(fault.Record{Type: tc.typ, XID: tc.xid, Severity: fault.SeverityP1})
		assert.Equal(t, tc.rule, d.Rule, tc.typ)
		assert.Equal(t, tc.ladder, d.Repair, tc.typ)
		assert.Equal(t, tc.checks, d.Checks, tc.typ)
	}
	// Memory and bus faults are still held for a human where the loop is
	// off (the exporter drops the hold only for a rule with a ladder).
	d := p.Decide(fault.Record{Type: fault.TypeGPUMemoryDBE, XID: 48, Severity: fault.SeverityP1})
	assert.NotEmpty(t, d.HoldReason)
	assert.Empty(t, p.Decide(fault.Record{Type: fault.TypeGPUThermal, Severity: fault.SeverityP2}).Repair, "no ladder: no repair")
}

func TestRepairValidateNamesRuleAndKey(t *testing.T) {
	cfg := Config{Rules: []Rule{
		{Name: "bad_ladder", Actions: []string{ActionCordon}, Repair: []string{"reflash", "reboot", "reboot", "rma"}},
		{Name: "bad_verify", Actions: []string{ActionCordon}, Verify: Verify{DiagLevel: 4, LinksSteady: -time.Second}},
		{Name: "good", Actions: []string{ActionCordon}, Repair: []string{"gpu_reset", "reboot"}, Verify: Verify{DiagLevel: 3, LinksSteady: time.Minute}},
	}}
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{
		`policy.rules[0] (bad_ladder): repair: unknown action "reflash"`,
		`repair: "reboot" listed twice`,
		"repair: rma always ends the ladder",
		"policy.rules[1] (bad_verify): verify.diag_level 4",
		"verify.links_steady -1s",
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "(good)")
}
