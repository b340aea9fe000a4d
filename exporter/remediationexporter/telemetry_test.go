package remediationexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The exporter's own telemetry (metadata.yaml) moves where the decisions
// are made: each test drives one decision path and reads the instruments
// back from the SDK.

// snapshot collects the exporter's instruments by name.
func (h *harness) snapshot() map[string]metricdata.Metrics {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(h.t, h.metrics.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// value is the value of name's data point with exactly attrs (key, value
// pairs): a counter's sum, a gauge's last value, a histogram's count; 0
// when there is no such point.
func (h *harness) value(name string, attrs ...string) int64 {
	h.t.Helper()
	require.Zero(h.t, len(attrs)%2, "attrs are key, value pairs")
	kvs := make([]attribute.KeyValue, 0, len(attrs)/2)
	for i := 0; i < len(attrs); i += 2 {
		kvs = append(kvs, attribute.String(attrs[i], attrs[i+1]))
	}
	want := attribute.NewSet(kvs...)
	m, ok := h.snapshot()[name]
	if !ok {
		return 0
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return int64(p.Count)
			}
		}
	default:
		h.t.Fatalf("%s: unexpected data %T", name, m.Data)
	}
	return 0
}

const (
	mDecisions   = "otelcol_remediation_decisions"
	mCallSeconds = "otelcol_remediation_platform_call_duration_seconds"
	mCallErrors  = "otelcol_remediation_platform_call_errors"
	mTripped     = "otelcol_remediation_breaker_tripped"
	mTrips       = "otelcol_remediation_breaker_trips"
	mQuarantined = "otelcol_remediation_quarantined_nodes"
)

func call(op string) []string { return []string{"platform", "kubernetes", "operation", op} }

var onKubernetes = []string{"platform", "kubernetes"}

func TestTelemetryQuarantineReleaseCooldown(t *testing.T) {
	h := newHarness(t)
	assert.Equal(t, int64(0), h.value(mQuarantined, onKubernetes...), "recorded at start: nothing quarantined")
	_, recorded := h.snapshot()[mQuarantined]
	assert.True(t, recorded, "the gauge is recorded at start")

	r := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl008", fault.StateOpen)
	require.NoError(t, h.consume(r))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "acted"))
	assert.Equal(t, int64(1), h.value(mQuarantined, onKubernetes...))
	for _, op := range []string{"check", "breaker_tripped", "breaker_admit", "quarantine"} {
		assert.Equal(t, int64(1), h.value(mCallSeconds, call(op)...), op)
	}
	assert.Equal(t, int64(0), h.value(mTripped, onKubernetes...), "read closed")
	assert.Equal(t, int64(0), h.value(mCallErrors, call("quarantine")...))

	// Resolved, then the verification window: released, no node held.
	require.NoError(t, h.consume(withState(r, fault.StateResolved)))
	assert.Equal(t, int64(1), h.value(mQuarantined, onKubernetes...), "held during the verification window")
	h.clock.Advance(30 * time.Minute)
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "release", "outcome", "acted"))
	assert.Equal(t, int64(1), h.value(mCallSeconds, call("release")...))
	assert.Equal(t, int64(0), h.value(mQuarantined, onKubernetes...))

	// A new fault in the cooldown: refused by that rail.
	require.NoError(t, h.consume(faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "xl008", fault.StateOpen)))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "refused", "rail", "cooldown"))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "acted"), "unchanged")

}

func TestTelemetryBreakerTrips(t *testing.T) {
	h := newHarness(t)
	h.platform.breaker.budget = 1
	var recs []fault.Record
	for _, n := range []string{"n1", "n2", "n3"} {
		recs = append(recs, faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, n, fault.StateOpen))
	}
	require.NoError(t, h.consume(recs...))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "acted"))
	assert.Equal(t, int64(2), h.value(mDecisions, "action", "quarantine", "outcome", "refused", "rail", "breaker"))
	assert.Equal(t, int64(1), h.value(mTrips, onKubernetes...), "one trip: the second node; the third finds it tripped")
	assert.Equal(t, int64(1), h.value(mTripped, onKubernetes...))
	assert.Equal(t, int64(1), h.value(mQuarantined, onKubernetes...))

	// An update of the quarantined node's fault asks for nothing new: skipped.
	require.NoError(t, h.consume(withState(recs[0], fault.StateUpdate)))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "skipped"))

	// A human resets it: the next quarantine reads it closed.
	require.NoError(t, h.platform.breaker.Reset(context.Background()))
	h.platform.breaker.budget = 10
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n4", fault.StateOpen)))
	assert.Equal(t, int64(0), h.value(mTripped, onKubernetes...))
	assert.Equal(t, int64(1), h.value(mTrips, onKubernetes...))
	assert.Equal(t, int64(2), h.value(mQuarantined, onKubernetes...))
}

func TestTelemetryPlatformErrors(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *dependencies) { c.MaxAttempts = 3 })
	h.platform.failNext = 3
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl007", fault.StateOpen)
	require.ErrorIs(t, h.consume(r), errAPIServerDown)
	assert.Equal(t, int64(3), h.value(mCallErrors, call("quarantine")...), "each attempt")
	assert.Equal(t, int64(3), h.value(mCallSeconds, call("quarantine")...))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "failed"))
	assert.Equal(t, int64(0), h.value(mQuarantined, onKubernetes...))

	// The check failing fails closed, counted under its operation.
	h.platform.checkErr = errAPIServerDown
	r2 := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl009", fault.StateOpen)
	require.Error(t, h.consume(r2))
	assert.Equal(t, int64(3), h.value(mCallErrors, call("check")...))
	assert.Equal(t, int64(2), h.value(mDecisions, "action", "quarantine", "outcome", "failed"))
}

func TestTelemetryPlatformRefusalsAndHolds(t *testing.T) {
	h := newHarness(t)
	h.platform.skips = map[string]actuator.Outcome{"ghost": actuator.SkipNotFound}
	require.NoError(t, h.consume(faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "ghost", fault.StateOpen)))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "refused", "rail", "not_found"))

	// Someone else's cordon, as Quarantine answers it.
	h.platform.outcome = actuator.SkipForeign
	require.NoError(t, h.consume(faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "theirs", fault.StateOpen)))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "refused", "rail", "foreign"))
	assert.Equal(t, int64(0), h.value(mQuarantined, onKubernetes...))

	// A DBE waits for a human: its resolution is a release refused by the hold.
	h.platform.outcome = ""
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl010", fault.StateOpen)
	require.NoError(t, h.consume(dbe, withState(dbe, fault.StateResolved)))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "release", "outcome", "refused", "rail", "hold"))
	assert.Equal(t, int64(1), h.value(mQuarantined, onKubernetes...))
}

func TestTelemetryQuarantineCap(t *testing.T) {
	h := newHarness(t)
	h.platform.gpuNodes = 10 // max_quarantined_fraction 0.1 by default: one node
	require.NoError(t, h.consume(
		faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "c1", fault.StateOpen),
		faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "c2", fault.StateOpen)))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "acted"))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "refused", "rail", "quarantine_cap"))
}

func TestTelemetryDryRun(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *dependencies) { c.DryRun = true })
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "dry_run"))
	assert.Equal(t, int64(1), h.value(mQuarantined, onKubernetes...), "the node a dry run would hold")
	_, called := h.snapshot()[mCallSeconds]
	assert.False(t, called, "a dry run calls no platform")
}

func TestTelemetryBreakerGaugeClearsAfterAResetWithoutFaults(t *testing.T) {
	h := newHarness(t)
	h.platform.breaker.budget = 1
	require.NoError(t, h.consume(
		faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n1", fault.StateOpen),
		faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n2", fault.StateOpen)))
	require.Equal(t, int64(1), h.value(mTripped, onKubernetes...))

	// Still tripped a minute later: read again, still 1.
	h.clock.Advance(breakerPollInterval)
	assert.Equal(t, int64(1), h.value(mTripped, onKubernetes...))
	assert.Equal(t, int64(3), h.value(mCallSeconds, call("breaker_tripped")...), "one read per decision, one by the watch")

	// A human resets it (kubectl, the console); no fault comes: the next
	// read clears the gauge, and the watch stops.
	require.NoError(t, h.platform.breaker.Reset(context.Background()))
	h.clock.Advance(breakerPollInterval)
	assert.Equal(t, int64(0), h.value(mTripped, onKubernetes...))
	h.clock.Advance(10 * breakerPollInterval)
	assert.Equal(t, int64(4), h.value(mCallSeconds, call("breaker_tripped")...), "no reads once closed")
}
