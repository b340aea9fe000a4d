package faultcorrelatorconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// healthLogs is a DCGM health incident record as the dcgm receiver writes
// it (receiver/dcgmreceiver/healthwatch.go; its golden file is
// testdata/golden/health_logs.yaml there).
func healthLogs(result, code string, at time.Time) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(semconv.AttrHostName, testHost)
	rl.Resource().Attributes().PutStr(semconv.AttrGPUUUID, testGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	lr.SetEventName(semconv.EventGPUHealthIncident)
	a := lr.Attributes()
	a.PutStr(semconv.AttrEventName, semconv.EventGPUHealthIncident)
	a.PutStr(semconv.AttrGPUHealthSystem, semconv.HealthSystemMemory)
	a.PutStr(semconv.AttrGPUHealthResult, result)
	a.PutInt(semconv.AttrGPUHealthErrorCode, 4)
	a.PutStr(semconv.AttrGPUHealthErrorName, code)
	a.PutStr(semconv.AttrGPUHealthErrorMessage, "Detected 2 volatile double-bit ECC error(s) in GPU 1.")
	return ld
}

func TestHealthIncidentOpensItsFaultWithTheIncidentAsEvidence(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	require.NoError(t, c.ConsumeLogs(ctx, healthLogs(semconv.HealthResultFail, "DCGM_FR_VOLATILE_DBE_DETECTED", t0)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := faults(t, sink)
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, fault.TypeGPUMemoryDBE, r.Type)
	assert.Equal(t, fault.SeverityP1, r.Severity)
	assert.Equal(t, "dcgm_health_dbe", r.Rule)
	assert.Equal(t, fault.Entity{Kind: fault.EntityGPU, Key: testGPU}, r.Entity)
	assert.True(t, r.FirstSeen.Equal(t0), "onset is the record's time")
	require.Len(t, r.Evidence, 1)
	assert.Equal(t, "gpu.dcgm.health.incident{gpu.dcgm.health.error.name=DCGM_FR_VOLATILE_DBE_DETECTED}", r.Evidence[0].Signal)
	assert.Equal(t, "memory fail DCGM_FR_VOLATILE_DBE_DETECTED (4): Detected 2 volatile double-bit ECC error(s) in GPU 1.", r.Evidence[0].Text)
}

// The record of an incident that cleared (result pass) is no incident,
// and one whose result is missing or not text is none either.
func TestHealthClearedOrMalformedRecordOpensNothing(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	require.NoError(t, c.ConsumeLogs(ctx, healthLogs(semconv.HealthResultPass, "DCGM_FR_VOLATILE_DBE_DETECTED", t0)))
	odd := healthLogs(semconv.HealthResultFail, "DCGM_FR_VOLATILE_DBE_DETECTED", t0)
	odd.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutInt(semconv.AttrGPUHealthResult, 20)
	require.NoError(t, c.ConsumeLogs(ctx, odd))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, faults(t, sink))
}
