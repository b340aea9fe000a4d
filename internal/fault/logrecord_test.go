package fault

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

var update = flag.Bool("update", false, "rewrite testdata/example-record.yaml")

// exampleRecord is the record of docs/fault-record.md.
func exampleRecord() Record {
	onset := time.Date(2025, 3, 14, 9, 26, 40, 0, time.UTC)
	r := Record{
		Type: TypeNVLinkDegraded, State: StateOpen, Severity: SeverityP1, Confidence: 0.9,
		Rule: "nvlink_crc_over_100_allreduce_3x", Action: ActionCordon, BlastRadius: BlastNVLinkDomain,
		Entity:   Entity{EntityGPU, "GPU-5f2c8e1a-93b4-4c1d-8e0f-2a6b7c9d0e11"},
		HostName: "xl003", GPUUUID: "GPU-5f2c8e1a-93b4-4c1d-8e0f-2a6b7c9d0e11", JobID: "llama-70b",
		Rank: 1045, RankKnown: true,
		FirstSeen: onset, LastSeen: onset.Add(35 * time.Second),
		Summary: "job llama-70b: rank 1045 (node xl003, GPU 5): NVLink CRC +340 in 5m, all-reduce 3.4x its baseline, temperature normal -> NVLink degradation",
		Evidence: []Evidence{
			{Signal: "gpu.nvlink.errors{error.type=crc_flit}", Value: 340, Time: onset.Add(30 * time.Second)},
			{Signal: "nccl.collective.duration{nccl.collective=all_reduce}", Value: 3.4, Time: onset.Add(35 * time.Second),
				TraceID: pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
				SpanID:  pcommon.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}},
			{Signal: "hw.temperature{hw.sensor_location=gpu}", Value: 71, Time: onset.Add(30 * time.Second)},
		},
	}
	r.ID = r.ComputeID(DefaultBucket)
	return r
}

func exampleLogs() plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName("github.com/otelcol-gpu/otelcol-gpu/processor/faultcorrelator")
	exampleRecord().ToLogRecord(sl.LogRecords().AppendEmpty())
	return ld
}

func TestExampleRecordMatchesGolden(t *testing.T) {
	path := filepath.Join("testdata", "example-record.yaml")
	if *update {
		require.NoError(t, golden.WriteLogsToFile(path, exampleLogs()))
	}
	want, err := golden.ReadLogs(path)
	require.NoError(t, err)
	require.NoError(t, plogtest.CompareLogs(want, exampleLogs()))

	// The golden file decodes back to the record.
	got, err := FromLogRecord(want.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0))
	require.NoError(t, err)
	assert.Equal(t, exampleRecord(), got)
}

func TestRoundTrip(t *testing.T) {
	r := exampleRecord()
	lr := plog.NewLogRecord()
	lr.Attributes().PutStr("stale", "x") // ToLogRecord replaces what was there
	r.ToLogRecord(lr)
	_, stale := lr.Attributes().Get("stale")
	assert.False(t, stale)
	assert.Equal(t, EventName, lr.EventName())
	assert.Equal(t, plog.SeverityNumberFatal, lr.SeverityNumber())
	assert.Equal(t, r.Evidence[1].TraceID, lr.TraceID(), "the record links the first span evidence")
	got, err := FromLogRecord(lr)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	// A minimal gpu.xid record without rank, host or evidence.
	min := Record{ID: "x", Type: TypeGPUXID, XID: 13, State: StateResolved, Severity: SeverityP3,
		Confidence: 1, Rule: "xid_13", Action: ActionRestartApp, BlastRadius: BlastGPU,
		Entity: Entity{EntityGPU, "G"}, FirstSeen: time.Unix(0, 1).UTC(), LastSeen: time.Unix(5, 0).UTC()}
	lr = plog.NewLogRecord()
	min.ToLogRecord(lr)
	got, err = FromLogRecord(lr)
	require.NoError(t, err)
	min.Evidence = []Evidence{}
	assert.Equal(t, min, got)
	_, hasRank := lr.Attributes().Get(AttrTrainingRank)
	assert.False(t, hasRank, "an unknown rank is left out, not written as 0")
	_, marked := lr.Attributes().Get(AttrPresentAtStart)
	assert.False(t, marked, "fault.present_at_start is written only when true")

	// A fault the first reading already showed carries the mark.
	min.PresentAtStart = true
	lr = plog.NewLogRecord()
	min.ToLogRecord(lr)
	v, ok := lr.Attributes().Get(AttrPresentAtStart)
	require.True(t, ok)
	assert.True(t, v.Bool())
	got, err = FromLogRecord(lr)
	require.NoError(t, err)
	assert.Equal(t, min, got)
}

func TestFromLogRecordRejectsMalformed(t *testing.T) {
	cases := map[string]func(pcommon.Map){
		AttrID:             func(m pcommon.Map) { m.Remove(AttrID) },
		AttrType:           func(m pcommon.Map) { m.PutStr(AttrType, "gpu.on_fire") },
		AttrState:          func(m pcommon.Map) { m.PutStr(AttrState, "closed") },
		AttrSeverity:       func(m pcommon.Map) { m.PutStr(AttrSeverity, "P0") },
		AttrAction:         func(m pcommon.Map) { m.PutStr(AttrAction, "reboot") },
		AttrBlastRadius:    func(m pcommon.Map) { m.PutStr(AttrBlastRadius, "rack") },
		AttrEntity:         func(m pcommon.Map) { m.PutStr(AttrEntity, "switch:7") },
		AttrFirstSeen:      func(m pcommon.Map) { m.PutStr(AttrFirstSeen, "yesterday") },
		AttrConfidence:     func(m pcommon.Map) { m.PutDouble(AttrConfidence, 1.5) },
		AttrGPUXID:         func(m pcommon.Map) { m.PutStr(AttrGPUXID, "48") },
		AttrEvidence:       func(m pcommon.Map) { m.PutStr(AttrEvidence, "trust me") },
		AttrPresentAtStart: func(m pcommon.Map) { m.PutStr(AttrPresentAtStart, "yes") },
		"evidence observed_at": func(m pcommon.Map) {
			ev, _ := m.Get(AttrEvidence)
			ev.Slice().At(1).Map().PutStr(EvidenceObservedAt, "later")
		},
		"evidence trace": func(m pcommon.Map) {
			ev, _ := m.Get(AttrEvidence)
			ev.Slice().At(1).Map().PutStr(EvidenceTraceID, "abc")
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			lr := plog.NewLogRecord()
			exampleRecord().ToLogRecord(lr)
			mutate(lr.Attributes())
			_, err := FromLogRecord(lr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "fault: log record")
		})
	}
	lr := plog.NewLogRecord()
	exampleRecord().ToLogRecord(lr)
	lr.Attributes().PutDouble(AttrConfidence, 0) // 0 is a valid confidence
	_, err := FromLogRecord(lr)
	assert.NoError(t, err)
}

func TestFromLogs(t *testing.T) {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	r := Record{ID: "a07573c9c14f1fae", Type: TypeGPUThermal, State: StateOpen, Severity: SeverityP2, Confidence: 0.8,
		Rule: "thermal_throttling", Action: ActionNone, BlastRadius: BlastGPU,
		Entity: Entity{Kind: EntityGPU, Key: "GPU-1"}, FirstSeen: time.Unix(100, 0).UTC(), LastSeen: time.Unix(160, 0).UTC()}
	r.ToLogRecord(lrs.AppendEmpty())
	lrs.AppendEmpty().Body().SetStr("not a fault record")
	got, errs := FromLogs(ld)
	if len(got) != 1 || got[0].ID != r.ID || got[0].Type != r.Type {
		t.Fatalf("FromLogs = %+v, want the one record", got)
	}
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want one for the plain log record", errs)
	}
}

// A span reading the gateway placed at its arrival keeps both times: the
// data's own (time) and the arrival (observed_at). A record without
// observed_at (written before it existed, or a reading placed at its data
// time) reads back with ObservedAt zero.
func TestEvidenceObservedAtRoundTrip(t *testing.T) {
	r := exampleRecord()
	arrival := r.Evidence[1].Time.Add(10 * time.Minute)
	r.Evidence[1].ObservedAt = arrival
	lr := plog.NewLogRecord()
	r.ToLogRecord(lr)
	evs, ok := lr.Attributes().Get(AttrEvidence)
	require.True(t, ok)
	v, ok := evs.Slice().At(1).Map().Get(EvidenceObservedAt)
	require.True(t, ok)
	assert.Equal(t, "2025-03-14T09:37:15Z", v.Str())
	_, ok = evs.Slice().At(0).Map().Get(EvidenceObservedAt)
	assert.False(t, ok, "written only when set")
	got, err := FromLogRecord(lr)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	assert.True(t, got.Evidence[1].ObservedAt.Equal(arrival))
	assert.True(t, got.Evidence[0].ObservedAt.IsZero())
}
