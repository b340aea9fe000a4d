package confirm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

const (
	gpu0 = "GPU-00000000-0000-0000-0000-000000000000"
	gpu1 = "GPU-11111111-1111-1111-1111-111111111111"
)

var gpus = []string{gpu0, gpu1}

// readings records one reading of every GPU every 10 s from start for n
// readings; grow(i, uuid) may change counters of reading i.
func readings(t *testing.T, start time.Time, n int, grow func(i int, uuid string, s *nodestate.GPUSample)) *nodestate.MemoryStore {
	t.Helper()
	store := nodestate.NewMemoryStore(nodestate.DefaultLimits())
	for i := range n {
		for _, uuid := range gpus {
			var s nodestate.GPUSample
			s.SMActive = nodestate.Gauge{Value: 0, Valid: true}
			for k := range s.Counters {
				s.Counters[k] = nodestate.Counter{Value: 5, Start: start.Add(-time.Hour), Valid: true}
			}
			if grow != nil {
				grow(i, uuid, &s)
			}
			store.RecordGPU(uuid, start.Add(time.Duration(i)*10*time.Second), s)
		}
	}
	return store
}

func TestConfirmReadsOnlyTheFaultsOwnSignals(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	start := now.Add(-5 * time.Minute)
	onset := now.Add(-2 * time.Minute)
	dbeOnGPU1 := readings(t, start, 31, func(i int, uuid string, s *nodestate.GPUSample) {
		if uuid == gpu1 && i >= 18 {
			s.Counters[nodestate.ECCDBEVolatile].Value = 7
		}
	})
	quiet := readings(t, start, 31, nil)
	crcOnGPU0 := readings(t, start, 31, func(i int, uuid string, s *nodestate.GPUSample) {
		if uuid == gpu0 {
			s.Counters[nodestate.NVLinkCRCFlitErrors].Value = uint64(5 + i)
		}
	})
	withXID := func(code int) *nodestate.MemoryStore {
		s := readings(t, start, 31, nil)
		s.RecordXID(gpu1, onset, code)
		return s
	}

	for _, tc := range []struct {
		name      string
		store     Store
		req       repair.ConfirmRequest
		confirmed bool
		detail    string
	}{
		{"DBE grew on the fault's GPU", dbeOnGPU1, req(fault.TypeGPUMemoryDBE, gpu1, 0, onset), true, "ecc.dbe_volatile +2"},
		{"DBE on another GPU than the fault's", dbeOnGPU1, req(fault.TypeGPUMemoryDBE, gpu0, 0, onset), false, "none of this node's own readings"},
		{"DBE claimed, nothing grew", quiet, req(fault.TypeGPUMemoryDBE, gpu1, 0, onset), false, "none of this node's own readings"},
		{"DBE from XID 48", withXID(48), req(fault.TypeGPUMemoryDBE, gpu1, 0, onset), true, "XID 48"},
		{"DBE, an unrelated XID", withXID(13), req(fault.TypeGPUMemoryDBE, gpu1, 0, onset), false, "none of this node's own readings"},
		{"NVLink CRC on any GPU of a node fault", crcOnGPU0, req(fault.TypeNVLinkDegraded, "", 0, onset), true, "nvlink.crc_flit"},
		{"NVLink claimed, quiet links", quiet, req(fault.TypeNVLinkDegraded, "", 0, onset), false, "none of this node's own readings"},
		{"XID fault with its code seen", withXID(79), req(fault.TypeGPUXID, gpu1, 79, onset), true, "XID 79"},
		{"XID fault, another code seen", withXID(79), req(fault.TypeGPUXID, gpu1, 45, onset), false, "none"},
		{"XID fault without a code", withXID(79), req(fault.TypeGPUXID, gpu1, 0, onset), false, "without its code"},
		{"a GPU not of this node", dbeOnGPU1, req(fault.TypeGPUMemoryDBE, "GPU-forged", 0, onset), false, "not one of this node's GPUs"},
		{"a straggler is not hardware", dbeOnGPU1, req(fault.TypeStragglerCompute, gpu1, 0, onset), false, "no hardware signal"},
		{"a silent node says nothing", dbeOnGPU1, req(fault.TypeNodeSilent, "", 0, onset), false, "no hardware signal"},
		{"unresponsive GPU answering", quiet, req(fault.TypeGPUUnresponsive, gpu1, 0, onset), false, "none"},
		{"growth long before the onset does not count", readings(t, start, 31, func(i int, uuid string, s *nodestate.GPUSample) {
			if uuid == gpu1 && i >= 1 {
				s.Counters[nodestate.ECCDBEVolatile].Value = 7
			}
		}), req(fault.TypeGPUMemoryDBE, gpu1, 0, now.Add(-30*time.Second)), false, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Node = "n1"
			got := Confirm(tc.store, tc.req, gpus, now)
			assert.Equal(t, tc.confirmed, got.Confirmed, "%+v", got)
			joined := got.Detail
			for _, e := range got.Evidence {
				joined += " | " + e
			}
			assert.Contains(t, joined, tc.detail)
			if tc.confirmed {
				assert.NotEmpty(t, got.Evidence)
			} else {
				assert.Empty(t, got.Evidence)
			}
		})
	}
}

func TestConfirmUnresponsiveFromStaleReadings(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	// readings stopped 5 minutes ago
	store := readings(t, now.Add(-9*time.Minute), 25, nil)
	got := Confirm(store, req(fault.TypeGPUUnresponsive, gpu0, 0, now.Add(-4*time.Minute)), gpus, now)
	require.True(t, got.Confirmed, "%+v", got)
	assert.Contains(t, got.Evidence[0], "newest reading")
}

func TestConfirmIBFlap(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	store := nodestate.NewMemoryStore(nodestate.DefaultLimits())
	for i := range 10 {
		var s nodestate.IBSample
		for k := range s.Counters {
			s.Counters[k] = nodestate.Counter{Value: 1, Valid: true}
		}
		if i >= 6 {
			s.Counters[nodestate.IBLinkDowned].Value = 2
		}
		store.RecordIB("mlx5_0", "1", now.Add(time.Duration(i-10)*10*time.Second), s)
	}
	got := Confirm(store, req(fault.TypeIBLinkFlap, "", 0, now.Add(-time.Minute)), gpus, now)
	require.True(t, got.Confirmed, "%+v", got)
	assert.Contains(t, got.Evidence[0], "mlx5_0/1: link_downed +1")

	got = Confirm(nodestate.NewMemoryStore(nodestate.DefaultLimits()), req(fault.TypeIBLinkFlap, "", 0, now), gpus, now)
	assert.False(t, got.Confirmed)
	assert.Contains(t, got.Detail, "no InfiniBand reading")
}

// An onset claimed far in the past or in the future is clamped: the agent
// never looks further back than MaxLookback, and a future onset looks at
// the recent past only.
func TestConfirmClampsTheWindow(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	store := readings(t, now.Add(-5*time.Minute), 31, func(i int, uuid string, s *nodestate.GPUSample) {
		if uuid == gpu1 && i >= 29 {
			s.Counters[nodestate.ECCDBEVolatile].Value = 9
		}
	})
	for _, since := range []time.Time{{}, now.Add(-1000 * time.Hour), now.Add(time.Hour)} {
		got := Confirm(store, req(fault.TypeGPUMemoryDBE, gpu1, 0, since), gpus, now)
		assert.True(t, got.Confirmed, "since %v: %+v", since, got)
	}
}

func req(typ fault.Type, gpu string, xid int, since time.Time) repair.ConfirmRequest {
	return repair.ConfirmRequest{ID: "r1", FaultID: "f1", FaultType: string(typ), GPUUUID: gpu, XID: xid, Since: since}
}
