package slurm

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Lines of a node through a reboot, from Slurm 22.05.8 (the slurmtest
// cluster): requested, issued, complete, timed out; and a node with a job.
const (
	nodeLineRebootRequested = `NodeName=gpu-node1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.91 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=127.0.0.1 NodeHostName=localhost Port=34475 Version=22.05.8 OS=Linux 6.18.44-fc-v1272 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=17521 Sockets=1 Boards=1 State=IDLE+DRAIN+REBOOT_REQUESTED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A NextState=DOWN Partitions=gpu  BootTime=2026-12-05T14:53:29 SlurmdStartTime=2026-12-06T04:46:44 LastBusyTime=2026-12-06T04:46:44 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=otelcol-gpu: reboot 1 gpu.ecc.dbe f-1 [root@2026-12-06T04:46:45]`
	nodeLineRebootIssued    = `NodeName=gpu-node1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.91 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=127.0.0.1 NodeHostName=localhost Port=34475 Version=22.05.8 OS=Linux 6.18.44-fc-v1272 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=17521 Sockets=1 Boards=1 State=DOWN+DRAIN+REBOOT_ISSUED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A NextState=DOWN Partitions=gpu  BootTime=2026-12-05T14:53:29 SlurmdStartTime=2026-12-06T04:46:44 LastBusyTime=2026-12-06T04:46:44 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=otelcol-gpu: reboot 1 gpu.ecc.dbe f-1 : reboot issued [root@2026-12-06T04:46:46]`
	nodeLineRebootComplete  = `NodeName=gpu-node1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.91 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=127.0.0.1 NodeHostName=localhost Port=34475 Version=22.05.8 OS=Linux 6.18.44-fc-v1272 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=17521 Sockets=1 Boards=1 State=DOWN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  BootTime=2026-12-06T04:46:47 SlurmdStartTime=2026-12-06T04:46:48 LastBusyTime=2026-12-06T04:46:44 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=otelcol-gpu: reboot 1 gpu.ecc.dbe f-1 : reboot issued : reboot complete [root@2026-12-06T04:46:48]`
	nodeLineRebootTimedOut  = `NodeName=gpu-node2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.91 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=127.0.0.1 NodeHostName=localhost Port=41777 Version=22.05.8 OS=Linux 6.18.44-fc-v1272 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=17521 Sockets=1 Boards=1 State=DOWN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  BootTime=2026-12-05T14:53:29 SlurmdStartTime=2026-12-06T04:46:44 LastBusyTime=2026-12-06T04:46:44 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=otelcol-gpu: reboot 1 gpu.ecc.dbe f-2 : reboot issued : reboot timed out [root@2026-12-06T04:47:13]`
	nodeLineDraining        = `NodeName=gpu-node3 Arch=x86_64 CoresPerSocket=1  CPUAlloc=1 CPUEfctv=1 CPUTot=1 CPULoad=0.91 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=127.0.0.1 NodeHostName=localhost Port=41779 Version=22.05.8 OS=Linux 6.18.44-fc-v1272 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=17521 Sockets=1 Boards=1 State=ALLOCATED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  BootTime=2026-12-05T14:53:29 SlurmdStartTime=2026-12-06T04:46:44 LastBusyTime=2026-12-06T04:46:44 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES=cpu=1 CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=otelcol-gpu: gpu.ecc.dbe f-3 [root@2026-12-06T04:46:45]`
)

func parseOne(t *testing.T, line string) nodeInfo {
	t.Helper()
	nodes := parseNodeLines(line)
	require.Len(t, nodes, 1)
	return nodes[0]
}

func TestParseRebootLines(t *testing.T) {
	n := parseOne(t, nodeLineRebootRequested)
	assert.Equal(t, []string{"IDLE", "DRAIN", "REBOOT_REQUESTED"}, n.States)
	assert.Equal(t, "DOWN", n.NextState)
	assert.Equal(t, "otelcol-gpu: reboot 1 gpu.ecc.dbe f-1", n.Reason)
	assert.Equal(t, time.Date(2026, 12, 5, 14, 53, 29, 0, time.Local), n.BootTime)
	assert.Equal(t, 0, n.CPUAlloc)
	assert.True(t, rebootPending(n))

	n = parseOne(t, nodeLineRebootIssued)
	assert.Equal(t, []string{"DOWN", "DRAIN", "REBOOT_ISSUED"}, n.States)
	assert.True(t, rebootPending(n))

	n = parseOne(t, nodeLineRebootComplete)
	assert.Equal(t, []string{"DOWN"}, n.States)
	assert.Empty(t, n.NextState)
	assert.False(t, rebootPending(n))
	assert.True(t, n.unavailable(), "DOWN after the reboot: still out of service")
	assert.Equal(t, time.Date(2026, 12, 6, 4, 46, 47, 0, time.Local), n.BootTime)

	n = parseOne(t, nodeLineDraining)
	assert.Equal(t, 1, n.CPUAlloc)
}

func rebootReq(node, id string, attempt int) actuator.RepairRequest {
	return actuator.RepairRequest{Node: node, FaultID: id, FaultType: "gpu.ecc.dbe", Attempt: attempt, Action: repair.ActionReboot,
		Requested: time.Date(2026, 12, 6, 4, 46, 45, 300e6, time.Local)}
}

func TestRebootProgress(t *testing.T) {
	p := newPlatform(NewDefaultConfig(), &fakeTransport{}, nil)
	cases := []struct {
		name string
		line string
		req  actuator.RepairRequest
		want actuator.RepairState
	}{
		{"requested", nodeLineRebootRequested, rebootReq("gpu-node1", "f-1", 1), actuator.RepairPending},
		{"issued", nodeLineRebootIssued, rebootReq("gpu-node1", "f-1", 1), actuator.RepairPending},
		{"complete", nodeLineRebootComplete, rebootReq("gpu-node1", "f-1", 1), actuator.RepairDone},
		{"timed out", nodeLineRebootTimedOut, rebootReq("gpu-node2", "f-2", 1), actuator.RepairFailed},
		{"another attempt's", nodeLineRebootComplete, rebootReq("gpu-node1", "f-1", 2), actuator.RepairFailed},
		{"another fault's", nodeLineRebootComplete, rebootReq("gpu-node1", "f-9", 1), actuator.RepairFailed},
		{"only drained", nodeLineDraining, rebootReq("gpu-node3", "f-3", 1), actuator.RepairFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := parseOne(t, tc.line)
			got := rebootProgress(n.Name, n, p.isOurReboot(n.Reason, tc.req), tc.req.Requested)
			assert.Equal(t, tc.want, got.State, got.Detail)
		})
	}
	// Complete, but the node booted before the request: not our reboot.
	n := parseOne(t, nodeLineRebootComplete)
	got := rebootProgress(n.Name, n, true, n.BootTime.Add(time.Minute))
	assert.Equal(t, actuator.RepairFailed, got.State, got.Detail)
	assert.Contains(t, got.Detail, "precedes")
}

func TestRebootReason(t *testing.T) {
	p := newPlatform(NewDefaultConfig(), &fakeTransport{}, nil)
	req := rebootReq("gpu-node1", "f-1", 2)
	assert.Equal(t, "otelcol-gpu: reboot 2 gpu.ecc.dbe f-1", p.rebootReason(req))
	req.Reason = `gpu.ecc.dbe.48 f-1 "quoted"` + "\nline"
	r := p.rebootReason(req)
	assert.Equal(t, "otelcol-gpu: reboot 2 gpu.ecc.dbe.48 f-1 quoted line", r)
	assert.True(t, p.isOurReboot(r+rebootIssued+rebootComplete, req))
	assert.False(t, p.isOurReboot(r, rebootReq("gpu-node1", "f-1", 1)), "attempt 1 is another reboot")
	assert.False(t, p.isOurReboot("otelcol-gpu: reboot 2 gpu.ecc.dbe f-9", req), "another fault")
	assert.False(t, p.isOurReboot("admin: reboot 2 f-1", req), "not our prefix")
}

func TestDrainedState(t *testing.T) {
	for line, want := range map[string]bool{
		nodeLineIdle:                             false, // in service
		nodeLineDrained:                          true,
		nodeLineDraining:                         false,
		nodeLineRebootRequested:                  true,
		nodeLineRebootComplete:                   true,
		"NodeName=n State=MIXED+DRAIN":           false,
		"NodeName=n State=IDLE+DRAIN+COMPLETING": false,
		"NodeName=n State=IDLE+DRAIN CPUAlloc=4": false,
		"NodeName=n State=IDLE+DRAIN CPUAlloc=0": true,
	} {
		got, detail := drainedState(parseOne(t, line))
		assert.Equal(t, want, got, "%.60s: %s", line, detail)
	}
}

func TestRepairsNeedScontrol(t *testing.T) {
	p := newPlatform(NewDefaultConfig(), &fakeTransport{}, nil)
	assert.Empty(t, p.Repairs(), "a transport without reboot carries out no repair")
	res, err := p.StartRepair(context.Background(), rebootReq("gpu-node1", "f-1", 1))
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome)

	p = newPlatform(NewDefaultConfig(), &scontrolTransport{path: "/nonexistent/scontrol", timeout: time.Second}, nil)
	assert.Equal(t, []repair.Action{repair.ActionReboot}, p.Repairs())
	res, err = p.StartRepair(context.Background(), actuator.RepairRequest{Node: "gpu-node1", FaultID: "f-1", Attempt: 1, Action: repair.ActionGPUReset})
	require.NoError(t, err)
	assert.Equal(t, actuator.SkipExcluded, res.Outcome, "the agent resets GPUs")
	for _, bad := range []actuator.RepairRequest{
		{Node: "gpu-node1", Attempt: 1, Action: repair.ActionReboot},
		{Node: "gpu-node1", FaultID: "f 1", Attempt: 1, Action: repair.ActionReboot},
		{Node: "gpu-node1", FaultID: "f-1", Attempt: 0, Action: repair.ActionReboot},
	} {
		_, err := p.StartRepair(context.Background(), bad)
		assert.Error(t, err, "%+v", bad)
	}
}

func TestDrainMarkFollowsReboot(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 46, 45, 0, time.Local)
	m := drainMark{reason: "otelcol-gpu: reboot 1 gpu.ecc.dbe f-1", at: at, reboot: true}
	for _, tc := range []struct {
		reason string
		at     time.Time
		want   bool
	}{
		{m.reason, at, true},
		{m.reason + rebootIssued, at.Add(time.Second), true},
		{m.reason + rebootIssued + rebootComplete, at.Add(3 * time.Second), true},
		{m.reason + rebootIssued + rebootTimedOut, at.Add(time.Minute), true},
		{m.reason + rebootTimedOut, at.Add(time.Minute), true},
		{m.reason + " : admin", at.Add(time.Second), false},
		{m.reason + rebootIssued, at.Add(-time.Second), false},
		{m.reason, at.Add(time.Second), false}, // our words, a later drain
	} {
		assert.Equal(t, tc.want, m.still(nodeInfo{Reason: tc.reason, ReasonTime: tc.at}), tc.reason)
	}
	// A plain drain mark does not follow suffixes.
	plain := drainMark{reason: m.reason, at: at}
	assert.False(t, plain.still(nodeInfo{Reason: m.reason + rebootIssued, ReasonTime: at.Add(time.Second)}))
}
