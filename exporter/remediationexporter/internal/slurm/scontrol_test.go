package slurm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lines captured from Slurm 22.05.8 (Debian bookworm), `scontrol -o show`.
const (
	nodeLineIdle    = `NodeName=gpu-node1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=1.66 AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.1 NodeHostName=localhost Port=17821 Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=17521 Sockets=1 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  BootTime=2026-11-29T10:11:03 SlurmdStartTime=2026-11-29T13:02:53 LastBusyTime=2026-11-29T13:02:53 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s`
	nodeLineDrained = `NodeName=gpu-node2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=1.66 AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.1 NodeHostName=localhost Port=17821 Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=17521 Sockets=1 Boards=1 State=DOWN*+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  BootTime=2026-11-29T10:11:03 SlurmdStartTime=2026-11-29T13:02:53 LastBusyTime=2026-11-29T13:02:53 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=otelcol-gpu: gpu.ecc.dbe a07573c9c14f1fae key=value [root@2026-11-29T13:02:58]`
	resvLine        = `ReservationName=maint StartTime=2026-11-29T13:04:37 EndTime=2026-11-29T14:04:37 Duration=01:00:00 Nodes=gpu-node[2-3] NodeCnt=2 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES TRES=cpu=2 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)`
)

func TestParseNodeLines(t *testing.T) {
	nodes := parseNodeLines(nodeLineIdle + "\n" + nodeLineDrained + "\n\n")
	require.Len(t, nodes, 2)
	assert.Equal(t, nodeInfo{Name: "gpu-node1", States: []string{"IDLE"}, Gres: "(null)",
		BootTime: time.Date(2026, 11, 29, 10, 11, 3, 0, time.Local)}, nodes[0])
	assert.False(t, nodes[0].unavailable())

	n := nodes[1]
	assert.Equal(t, "gpu-node2", n.Name)
	assert.Equal(t, []string{"NOT_RESPONDING", "DOWN", "DRAIN"}, n.States)
	assert.True(t, n.unavailable())
	assert.Equal(t, "otelcol-gpu: gpu.ecc.dbe a07573c9c14f1fae key=value", n.Reason)
	assert.Equal(t, time.Date(2026, 11, 29, 13, 2, 58, 0, time.Local), n.ReasonTime)

	// A reason without the [user@time] trailer still parses.
	nodes = parseNodeLines("NodeName=n1 State=IDLE+DRAIN Reason=bad gpu")
	require.Len(t, nodes, 1)
	assert.Equal(t, "bad gpu", nodes[0].Reason)
	assert.True(t, nodes[0].ReasonTime.IsZero())
	assert.True(t, nodes[0].BootTime.IsZero())
	assert.Equal(t, -1, nodes[0].CPUAlloc, "not printed: unknown")

	assert.Empty(t, parseNodeLines("Node nosuch not found\n"))
}

func TestParseReservationLines(t *testing.T) {
	assert.Empty(t, parseReservationLines("No reservations in the system\n"))
	res := parseReservationLines(resvLine + "\n" + "ReservationName=x Nodes=(null) Flags=DAILY State=INACTIVE\n")
	require.Len(t, res, 2)
	assert.Equal(t, reservation{Name: "maint", Nodes: "gpu-node[2-3]", Flags: []string{"MAINT", "SPEC_NODES"}, Active: true}, res[0])
	assert.True(t, res[0].maintenance())
	assert.False(t, res[1].maintenance())
	assert.False(t, res[1].Active)
}

func FuzzParseScontrol(f *testing.F) {
	for _, s := range []string{nodeLineIdle, nodeLineDrained, resvLine, "NodeName= State=+*+ Reason= [@]", "ReservationName=a Nodes=x[ Flags=,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range parseNodeLines(s) {
			if n.Name == "" {
				t.Fatalf("node without a name from %q", s)
			}
		}
		for _, r := range parseReservationLines(s) {
			_, _ = hostlistContains(r.Nodes, "n1")
		}
	})
}
