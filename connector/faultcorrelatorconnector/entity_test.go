package faultcorrelatorconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

func TestWhereEntities(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr("host.name", "n1")
	attrs.PutStr("gpu.uuid", "GPU-a")
	attrs.PutStr("training.job.id", "j")
	attrs.PutInt("training.rank", 7)
	attrs.PutStr("ib.device", "mlx5_0")
	attrs.PutInt("ib.port", 1)
	var w where
	w.read(attrs)
	assert.Equal(t, []fault.Entity{
		{Kind: fault.EntityGPU, Key: "GPU-a"},
		{Kind: fault.EntityIBPort, Key: "n1/mlx5_0/1"},
		{Kind: fault.EntityRank, Key: "j/7"},
		{Kind: fault.EntityNode, Key: "n1"},
		{Kind: fault.EntityJob, Key: "j"},
	}, w.entities())
	assert.Empty(t, where{}.entities())
}

// The correlator reads a rank as every step-record reader does
// (internal/steprecord, docs/training-scripts.md "Types"): an integral
// double is the rank, a string, a fraction or a negative number is none,
// and a span's rank of another type leaves the resource's in place.
func TestWhereRankFollowsTheContract(t *testing.T) {
	for _, tc := range []struct {
		name  string
		put   func(pcommon.Map)
		rank  int64
		known bool
	}{
		{"int", func(m pcommon.Map) { m.PutInt("training.rank", 5) }, 5, true},
		{"integral double", func(m pcommon.Map) { m.PutDouble("training.rank", 5) }, 5, true},
		{"string", func(m pcommon.Map) { m.PutStr("training.rank", "5") }, 0, false},
		{"fraction", func(m pcommon.Map) { m.PutDouble("training.rank", 5.5) }, 0, false},
		{"negative", func(m pcommon.Map) { m.PutInt("training.rank", -1) }, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := pcommon.NewMap()
			tc.put(attrs)
			var w where
			w.read(attrs)
			assert.Equal(t, tc.known, w.rankKnown)
			if tc.known {
				assert.Equal(t, tc.rank, w.rank)
			}
		})
	}
	res := pcommon.NewMap()
	res.PutInt("training.rank", 3)
	span := pcommon.NewMap()
	span.PutStr("training.rank", "9")
	var w where
	w.read(res)
	w.read(span)
	assert.True(t, w.rankKnown)
	assert.Equal(t, int64(3), w.rank, "a span's rank of the wrong type must not replace the resource's")

	job := pcommon.NewMap()
	job.PutInt("training.job.id", 42)
	w = where{}
	w.read(job)
	assert.Empty(t, w.job, "a job id must be a string")
}

// A map naming a key twice is read by its first entry, as Map.Get, the
// provenance processor and internal/steprecord read it; a later map (the
// record's own) still overrides an earlier one (its resource's).
func TestWhereReadsAKeysFirstEntry(t *testing.T) {
	m := otlpmaptest.Map(func(m pcommon.Map) {
		m.PutStr("host.name", "own")
		m.PutStr("gpu.uuid", "GPU-own")
		m.PutStr("training.job.id", "job")
		m.PutInt("training.rank", 3)
		m.PutStr("ib.device", "mlx5_0")
		m.PutInt("ib.port", 1)
		for _, k := range []string{"host.name", "gpu.uuid", "training.job.id", "ib.device"} {
			m.PutStr(otlpmaptest.Repeat(k), "victim")
		}
		m.PutInt(otlpmaptest.Repeat("training.rank"), 9)
		m.PutInt(otlpmaptest.Repeat("ib.port"), 2)
	})
	var w where
	w.read(m)
	for k, got := range map[string]string{"host.name": w.host, "gpu.uuid": w.gpu, "training.job.id": w.job, "ib.device": w.ibDevice, "ib.port": w.ibPort} {
		first, _ := m.Get(k)
		assert.Equal(t, first.AsString(), got, k)
	}
	assert.Equal(t, int64(3), w.rank)

	// A first entry of the wrong type is the value too: no rank.
	m = otlpmaptest.Map(func(m pcommon.Map) {
		m.PutStr("training.rank", "three")
		m.PutInt(otlpmaptest.Repeat("training.rank"), 9)
	})
	w = where{rank: 1, rankKnown: true}
	w.read(m)
	assert.Equal(t, int64(1), w.rank, "the earlier map's rank stays")

	span := pcommon.NewMap()
	span.PutStr("host.name", "span-host")
	w.read(span)
	assert.Equal(t, "span-host", w.host, "a later map overrides")
}

// A data point's signal names and source key read each key once, by its
// first entry.
func TestSignalNamesReadAKeysFirstEntry(t *testing.T) {
	m := otlpmaptest.Map(func(m pcommon.Map) {
		m.PutStr("gpu.ecc.type", "sbe")
		m.PutStr(otlpmaptest.Repeat("gpu.ecc.type"), "dbe_volatile")
	})
	assert.Equal(t, []string{"gpu.ecc.errors", "gpu.ecc.errors{gpu.ecc.type=sbe}"}, signalNames("gpu.ecc.errors", m))
	assert.Equal(t, "gpu.ecc.type=sbe", mapKey(m))
}
