package gpurepairtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	node = "node-a"
	gpu0 = "GPU-00000000-0000-4000-8000-000000000000"
	gpu1 = "GPU-11111111-1111-4111-8111-111111111111"
)

// The agent Start starts answers the gateway's signing client: its boot
// id (a new one after Reboot), a confirmation from the store, a reset the
// Devices record, a diagnostic run by the fake dcgmi on a real sample.
func TestStartServesTheRealAPI(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	devices := NewDevices(GPU{UUID: gpu0, Index: 0}, GPU{UUID: gpu1, Index: 1})
	store := nodestate.NewMemoryStore(nodestate.DefaultLimits())
	dcgmi := FakeDCGMI(t, Sample(t, "dcgm4_r2_memory_fail.json"))
	sink := new(consumertest.LogsSink)
	a := Start(t, Options{Node: node, PublicKey: pub, Devices: devices, Store: store, DiagCommand: dcgmi.Command, Logs: sink})
	ctx := context.Background()
	cl := clientTo(t, a, priv)

	st, err := cl.NodeStatus(ctx, node)
	require.NoError(t, err)
	require.Len(t, st.GPUs, 2)
	assert.False(t, st.GPUs[0].Busy)
	boot := st.BootID
	newBoot := a.Reboot(t)
	st, err = cl.NodeStatus(ctx, node)
	require.NoError(t, err)
	assert.NotEqual(t, boot, st.BootID)
	assert.Equal(t, newBoot, st.BootID)

	now := time.Now()
	var s nodestate.GPUSample
	s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: 0, Valid: true}
	store.RecordGPU(gpu1, now.Add(-time.Minute), s)
	s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: 2, Valid: true}
	store.RecordGPU(gpu1, now, s)
	conf, err := cl.Confirm(ctx, node, repair.ConfirmRequest{ID: "c1", Node: node, FaultID: "f1", FaultType: string(fault.TypeGPUMemoryDBE), GPUUUID: gpu1, Since: now})
	require.NoError(t, err)
	assert.True(t, conf.Confirmed, conf.Detail)

	devices.SetProcesses(gpu0, 42)
	_, err = cl.StartGPUReset(ctx, node, repair.GPUResetRequest{ID: "r1", Node: node, FaultID: "f1", GPUUUID: gpu1})
	require.NoError(t, err)
	j := waitJob(t, cl, "r1")
	assert.Equal(t, repair.JobPassed, j.State, j.Detail)
	assert.Equal(t, []Reset{{GPU: GPU{UUID: gpu1, Index: 1}, Idle: true}}, devices.Resets())

	devices.SetProcesses(gpu0)
	_, err = cl.StartVerify(ctx, node, repair.VerifyRequest{ID: "v1", Node: node, FaultID: "f1",
		Checks: []repair.CheckSpec{{Check: repair.CheckDiag, Level: 2}}})
	require.NoError(t, err)
	j = waitJob(t, cl, "v1")
	assert.Equal(t, repair.JobFailed, j.State, j.Detail)
	assert.Equal(t, []string{"diag -r 2 -j -i 0,1"}, dcgmi.Runs(t))
	require.Eventually(t, func() bool { return sink.LogRecordCount() == 2 }, time.Minute, time.Millisecond)
}

// clientTo is the gateway's signing client reaching a.
func clientTo(t *testing.T, a *Agent, key ed25519.PrivateKey) *repair.Client {
	signer, err := repair.NewSigner(key)
	require.NoError(t, err)
	c, err := repair.NewClient(repair.ClientConfig{URLTemplate: "http://{node}:8790", HTTPClient: a.HTTPClient()}, signer)
	require.NoError(t, err)
	return c
}

func waitJob(t *testing.T, cl *repair.Client, id string) repair.Job {
	t.Helper()
	var j repair.Job
	require.Eventually(t, func() bool {
		var err error
		j, err = cl.Job(context.Background(), node, id)
		return err == nil && j.State.Final()
	}, time.Minute, time.Millisecond)
	return j
}
