package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func rec(t fault.Type, sev fault.Severity, act fault.Action, xid int) fault.Record {
	return fault.Record{Type: t, Severity: sev, Action: act, XID: xid}
}

var (
	k8sQuarantine = []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}
	slurmDrain    = []actuator.Action{actuator.ActionDrain}
)

func TestDefaultPolicy(t *testing.T) {
	p, err := New(Config{})
	require.NoError(t, err)
	tests := []struct {
		name    string
		r       fault.Record
		k8s     []actuator.Action
		slurm   []actuator.Action
		webhook bool
		request Request
		release bool
		hold    bool
	}{
		{"dbe", rec(fault.TypeGPUMemoryDBE, "P1", "cordon", 48), k8sQuarantine, slurmDrain, true, RequestNotify, false, true},
		{"fell off bus", rec(fault.TypeGPUFellOffBus, "P1", "drain", 79), k8sQuarantine, slurmDrain, true, RequestNotify, false, true},
		{"nvlink P1", rec(fault.TypeNVLinkDegraded, "P1", "cordon", 0), k8sQuarantine, slurmDrain, true, RequestNotify, true, false},
		{"unresponsive", rec(fault.TypeGPUUnresponsive, "P1", "reset_gpu", 0), k8sQuarantine, slurmDrain, true, RequestNotify, true, false},
		{"xid 94", rec(fault.TypeGPUXID, "P1", "cordon", 94), k8sQuarantine, slurmDrain, true, RequestNotify, false, true},
		{"nvlink P2 trend", rec(fault.TypeNVLinkDegraded, "P2", "cordon", 0),
			[]actuator.Action{actuator.ActionTaint, actuator.ActionCondition}, []actuator.Action{}, true, RequestNotify, true, false},
		{"xid 13", rec(fault.TypeGPUXID, "P3", "restart_app", 13), []actuator.Action{}, []actuator.Action{}, true, RequestRestartApp, false, false},
		{"xid 31", rec(fault.TypeGPUXID, "P3", "none", 31), []actuator.Action{}, []actuator.Action{}, true, RequestRestartApp, false, false},
		{"rma", rec(fault.TypeGPUXID, "P2", "rma_review", 63), []actuator.Action{}, []actuator.Action{}, true, RequestHumanApproval, false, false},
		{"sbe rate", rec(fault.TypeGPUECCSBERate, "P3", "rma_review", 92), []actuator.Action{}, []actuator.Action{}, true, RequestHumanApproval, false, false},
		{"nccl hang", rec(fault.TypeNCCLHang, "P1", "restart_app", 0), []actuator.Action{}, []actuator.Action{}, true, RequestRestartApp, false, false},
		{"thermal P2", rec(fault.TypeGPUThermal, "P2", "none", 0),
			[]actuator.Action{actuator.ActionTaint, actuator.ActionCondition}, []actuator.Action{}, true, RequestNotify, true, false},
		{"sync wait P4", rec(fault.TypeGPUSyncWait, "P4", "none", 0), []actuator.Action{}, []actuator.Action{}, true, RequestNotify, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(tt.r)
			assert.NotEmpty(t, d.Rule)
			assert.Equal(t, tt.k8s, ForPlatform(d.NodeActions, PlatformKubernetes))
			assert.Equal(t, tt.slurm, ForPlatform(d.NodeActions, PlatformSlurm))
			assert.Equal(t, tt.webhook, d.Webhook)
			assert.Equal(t, tt.request, d.Request)
			assert.Equal(t, tt.release, d.ReturnToService)
			assert.Equal(t, tt.hold, d.HoldReason != "", d.HoldReason)
		})
	}
}

func TestUserRulesCannotAutoRMAOrReleaseHeldFaults(t *testing.T) {
	p, err := New(Config{
		Rules:            []Rule{{Name: "all", Actions: []string{"cordon", "webhook"}, Request: RequestNotify, ReturnToService: true}},
		HoldForHumanXIDs: []int{45},
	})
	require.NoError(t, err)
	d := p.Decide(rec(fault.TypeGPUXID, "P2", "rma_review", 62))
	assert.Equal(t, RequestHumanApproval, d.Request, "an RMA recommendation always asks a human")
	assert.False(t, p.Decide(rec(fault.TypeGPUMemoryDBE, "P1", "cordon", 0)).ReturnToService, "built-in hold stays")
	assert.False(t, p.Decide(rec(fault.TypeGPUXID, "P2", "reset_gpu", 45)).ReturnToService, "configured hold")
	assert.True(t, p.Decide(rec(fault.TypeGPUThermal, "P2", "none", 0)).ReturnToService)
}

func TestNoMatchDoesNothing(t *testing.T) {
	p, err := New(Config{Rules: []Rule{{Name: "dbe", Types: []string{"gpu.memory.dbe"}, Actions: []string{"none"}}}})
	require.NoError(t, err)
	d := p.Decide(rec(fault.TypeGPUThermal, "P2", "none", 0))
	assert.Empty(t, d.Rule)
	assert.Empty(t, d.NodeActions)
	assert.False(t, d.Webhook)
	d = p.Decide(rec(fault.TypeGPUMemoryDBE, "P1", "cordon", 0))
	assert.Equal(t, "dbe", d.Rule)
	assert.Empty(t, d.NodeActions)
	assert.False(t, d.Webhook)
}

func TestValidate(t *testing.T) {
	require.NoError(t, Config{Rules: DefaultRules()}.Validate())
	bad := Config{
		Rules: []Rule{
			{Types: []string{"gpu.on_fire"}, Actions: []string{"cordon"}},
			{Severities: []string{"P5"}, Actions: []string{"reboot"}},
			{Actions: []string{"none", "cordon"}},
			{Actions: nil},
			{XIDs: []int{-1}, FaultActions: []string{"explode"}, Actions: []string{"webhook"}, Request: "rma_now"},
		},
		HoldForHumanTypes: []string{"x"},
		HoldForHumanXIDs:  []int{0},
	}
	err := bad.Validate()
	require.Error(t, err)
	for _, want := range []string{"gpu.on_fire", "P5", "reboot", "none cannot", "actions is empty", "xid -1", "explode", "rma_now", "hold_for_human_types", "hold_for_human_xids"} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = New(bad)
	assert.Error(t, err)
}

func TestRoute(t *testing.T) {
	assert.Equal(t, "page", Route(fault.SeverityP1))
	assert.Equal(t, "chat", Route(fault.SeverityP2))
	assert.Equal(t, "record", Route(fault.SeverityP3))
	assert.Equal(t, "record", Route(fault.SeverityP4))
}

func TestForPlatformDedupes(t *testing.T) {
	in := []actuator.Action{actuator.ActionCordon, actuator.ActionDrain, actuator.ActionEvict}
	assert.Equal(t, []actuator.Action{actuator.ActionDrain}, ForPlatform(in, PlatformSlurm))
	assert.Equal(t, []actuator.Action{actuator.ActionCordon, actuator.ActionEvict}, ForPlatform(in, PlatformKubernetes))
	assert.Equal(t, in, ForPlatform(in, ""))
}

func TestPreferDeviceTaint(t *testing.T) {
	quarantine := []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}
	gpuFault := fault.Record{Severity: fault.SeverityP1, BlastRadius: fault.BlastGPU, GPUUUID: "GPU-5"}

	assert.Equal(t, []actuator.Action{actuator.ActionDeviceTaint, actuator.ActionCondition}, PreferDeviceTaint(quarantine, gpuFault))
	p2 := gpuFault
	p2.Severity = fault.SeverityP2
	assert.Equal(t, []actuator.Action{actuator.ActionDeviceTaint, actuator.ActionCondition},
		PreferDeviceTaint([]actuator.Action{actuator.ActionTaint, actuator.ActionCondition}, p2))

	for name, r := range map[string]fault.Record{
		"P3":          {Severity: fault.SeverityP3, BlastRadius: fault.BlastGPU, GPUUUID: "GPU-5"},
		"node fault":  {Severity: fault.SeverityP1, BlastRadius: fault.BlastNode, GPUUUID: "GPU-5"},
		"no GPU UUID": {Severity: fault.SeverityP1, BlastRadius: fault.BlastGPU},
	} {
		assert.Equal(t, quarantine, PreferDeviceTaint(quarantine, r), name)
	}
	webhookOnly := []actuator.Action{actuator.ActionCondition}
	assert.Equal(t, webhookOnly, PreferDeviceTaint(webhookOnly, gpuFault), "no node isolation to narrow")

	// A rule may name device_taint itself; Slurm drains for it.
	require.NoError(t, Config{Rules: []Rule{{Name: "dt", Actions: []string{ActionDeviceTaint}}}}.Validate())
	assert.Equal(t, []actuator.Action{actuator.ActionDrain}, ForPlatform([]actuator.Action{actuator.ActionDeviceTaint}, PlatformSlurm))
	assert.Equal(t, []actuator.Action{actuator.ActionDeviceTaint}, ForPlatform([]actuator.Action{actuator.ActionDeviceTaint}, PlatformKubernetes))
}
