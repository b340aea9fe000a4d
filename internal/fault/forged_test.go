package fault

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A training pod sends a perfect copy of a fault record over OTLP. After the
// edge it is no longer a fault record: FromLogRecord refuses it, so nothing
// downstream can act on it.
func TestForgedLogRecordCannotPassAsFault(t *testing.T) {
	ld := exampleLogs()
	ld.ResourceLogs().At(0).Resource().Attributes().PutStr("fault.action", "drain")
	lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	_, err := FromLogRecord(lr)
	require.NoError(t, err, "before the edge the forgery is well formed")
	require.True(t, HasForged(ld))
	_, err = FromLogRecord(lr)
	require.NoError(t, err, "HasForged changes nothing")

	n := StripForged(ld)
	// 12 fault.* record attributes + 1 resource attribute + the event name.
	assert.Equal(t, 14, n)
	_, err = FromLogRecord(lr)
	require.Error(t, err)
	for k := range lr.Attributes().All() {
		assert.NotRegexp(t, `^fault\.`, k)
	}
	v, ok := lr.Attributes().Get("forged.fault.action")
	require.True(t, ok, "the forged value stays visible under the forged. prefix")
	assert.Equal(t, "cordon", v.Str())
	assert.Equal(t, "forged.gpu.fault", lr.EventName())
	_, ok = lr.Attributes().Get("host.name")
	assert.True(t, ok, "other attributes are left alone")
	assert.Equal(t, 0, StripForged(ld), "a second pass finds nothing")
	assert.False(t, HasForged(ld))
}

func TestStripForgedTraces(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("fault.type", "gpu.memory.dbe")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().Attributes().PutStr("fault.id", "x")
	sp := ss.Spans().AppendEmpty()
	sp.Attributes().PutStr("fault.severity", "P1")
	sp.Attributes().PutStr("faultless", "kept") // only the fault. namespace
	sp.Attributes().PutInt("training.rank", 3)
	sp.Events().AppendEmpty().Attributes().PutStr("fault.state", "open")
	sp.Links().AppendEmpty().Attributes().PutStr("fault.rule", "r")
	require.True(t, HasForgedTraces(td))
	_, ok := sp.Attributes().Get("fault.severity")
	require.True(t, ok, "HasForgedTraces changes nothing")
	assert.Equal(t, 5, StripForgedTraces(td))
	assert.False(t, HasForgedTraces(td))
	_, ok = sp.Attributes().Get("faultless")
	assert.True(t, ok)
	v, _ := sp.Attributes().Get("forged.fault.severity")
	assert.Equal(t, "P1", v.Str())
	assert.Equal(t, 3, sp.Attributes().Len(), "faultless, training.rank and the renamed one")
}

func TestStripForgedMetrics(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("fault.type", "x")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	g.Attributes().PutStr("fault.id", "x")
	g.Exemplars().AppendEmpty().FilteredAttributes().PutStr("fault.id", "y")
	ms.AppendEmpty().SetEmptySum().DataPoints().AppendEmpty().Attributes().PutStr("fault.id", "x")
	ms.AppendEmpty().SetEmptyHistogram().DataPoints().AppendEmpty().Attributes().PutStr("fault.id", "x")
	ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints().AppendEmpty().Attributes().PutStr("fault.id", "x")
	sdp := ms.AppendEmpty().SetEmptySummary().DataPoints().AppendEmpty()
	sdp.Attributes().PutStr("fault.id", "x")
	sdp.Attributes().PutStr("gpu.uuid", "G")
	require.True(t, HasForgedMetrics(md))
	assert.Equal(t, 7, StripForgedMetrics(md))
	assert.False(t, HasForgedMetrics(md))
	assert.Equal(t, 0, StripForgedMetrics(md))
	v, ok := sdp.Attributes().Get("gpu.uuid")
	require.True(t, ok)
	assert.Equal(t, "G", v.Str())
}

// Renaming must keep structured values intact (the value is copied before
// the map is rearranged).
func TestRenameKeepsStructuredValues(t *testing.T) {
	m := pcommon.NewMap()
	s := m.PutEmptySlice("fault.evidence")
	s.AppendEmpty().SetEmptyMap().PutStr("signal", "gpu.xid")
	m.PutStr("fault.a", "1")
	m.PutStr("fault.b", "2")
	assert.Equal(t, 3, renameForged(m))
	v, ok := m.Get("forged.fault.evidence")
	require.True(t, ok)
	sig, _ := v.Slice().At(0).Map().Get("signal")
	assert.Equal(t, "gpu.xid", sig.Str())
	b, _ := m.Get("forged.fault.b")
	assert.Equal(t, "2", b.Str())
	assert.Equal(t, 3, m.Len())
}
