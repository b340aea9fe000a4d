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
)

func TestGPUResponsiveAgainIsNoHang(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("gpu.uuid", testGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0))
	lr.SetEventName("gpu.unresponsive")
	lr.Attributes().PutBool("gpu.unresponsive", false)
	require.NoError(t, c.ConsumeLogs(context.Background(), ld))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(context.Background()))
	assert.Empty(t, faults(t, sink))

	lr.Attributes().PutBool("gpu.unresponsive", true)
	require.NoError(t, c.ConsumeLogs(context.Background(), ld))
	require.NoError(t, c.evaluate(context.Background()))
	got := faults(t, sink)
	require.Len(t, got, 1)
	assert.Equal(t, fault.TypeGPUUnresponsive, got[0].Type)
}
