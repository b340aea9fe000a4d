package fault

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestIDIsStableAndPinned(t *testing.T) {
	onset := time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.UTC)
	a := ID("nvlink.degraded", "gpu:GPU-5f2c", onset, DefaultBucket)
	// The same inputs in another time zone: the same fault.
	b := ID("nvlink.degraded", "gpu:GPU-5f2c", onset.In(time.FixedZone("UTC+8", 8*3600)), DefaultBucket)
	assert.Equal(t, a, b)
	assert.Len(t, a, 16)
	// Pinned so that a change of the hash breaks replicas visibly: this is (checked with Python hashlib)
	// SHA-256("nvlink.degraded\x00gpu:GPU-5f2c\x001741944300")[:8].
	assert.Equal(t, "066de0693cadf1a1", a)
}

func TestIDBucketBoundaries(t *testing.T) {
	start := time.Date(2025, 3, 14, 9, 25, 0, 0, time.UTC) // a 5-minute boundary
	id := ID("gpu.memory.dbe", "gpu:G", start, DefaultBucket)
	assert.Equal(t, id, ID("gpu.memory.dbe", "gpu:G", start.Add(DefaultBucket-time.Nanosecond), DefaultBucket),
		"the last nanosecond of the bucket belongs to it")
	assert.NotEqual(t, id, ID("gpu.memory.dbe", "gpu:G", start.Add(-time.Nanosecond), DefaultBucket),
		"the nanosecond before starts the previous bucket")
	assert.NotEqual(t, id, ID("gpu.memory.dbe", "gpu:G", start.Add(DefaultBucket), DefaultBucket))

	// Every input takes part.
	assert.NotEqual(t, id, ID("gpu.thermal", "gpu:G", start, DefaultBucket))
	assert.NotEqual(t, id, ID("gpu.memory.dbe", "gpu:H", start, DefaultBucket))
	// The separator keeps "a"+"b\x00c" and "a\x00b"+"c" apart.
	assert.NotEqual(t, ID("a", "b", start, 0), ID("a\x00b", "", start, 0))

	// Without a bucket the exact onset counts.
	assert.NotEqual(t, ID("x", "gpu:G", start, 0), ID("x", "gpu:G", start.Add(time.Nanosecond), 0))
	// Before 1970 the floor still goes down, not towards zero.
	old := time.Unix(-1, 0)
	assert.Equal(t, ID("x", "e", old, time.Minute), ID("x", "e", time.Unix(-60, 0), time.Minute))
	// Sub-second buckets work too.
	assert.Equal(t, ID("x", "e", start.Add(100*time.Millisecond), 250*time.Millisecond),
		ID("x", "e", start.Add(249*time.Millisecond), 250*time.Millisecond))
}

func TestIDTypeCarriesXIDCode(t *testing.T) {
	r := Record{Type: TypeGPUXID, XID: 13, Entity: Entity{EntityGPU, "G"}, FirstSeen: time.Unix(600, 0)}
	assert.Equal(t, "gpu.xid.13", r.IDType())
	r2 := r
	r2.XID = 31
	assert.NotEqual(t, r.ComputeID(DefaultBucket), r2.ComputeID(DefaultBucket))
	r3 := Record{Type: TypeGPUMemoryDBE, XID: 48}
	assert.Equal(t, "gpu.memory.dbe", r3.IDType(), "only gpu.xid appends the code")
}

func TestEnumsValidate(t *testing.T) {
	for _, ty := range Types() {
		assert.True(t, ty.Valid(), ty)
	}
	require.Len(t, Types(), 20)
	assert.False(t, Type("gpu.on_fire").Valid())
	assert.True(t, StateResolved.Valid())
	assert.False(t, State("closed").Valid())
	assert.True(t, SeverityP4.Valid())
	assert.False(t, Severity("P5").Valid())
	assert.True(t, ActionRMAReview.Valid())
	assert.False(t, Action("reboot").Valid())
	assert.True(t, BlastNVLinkDomain.Valid())
	assert.False(t, BlastRadius("rack").Valid())
	assert.True(t, EntityIBPort.Valid())
	assert.False(t, EntityKind("switch").Valid())
	assert.Equal(t, "rank:llama-70b/1045", Entity{EntityRank, "llama-70b/1045"}.String())
}
