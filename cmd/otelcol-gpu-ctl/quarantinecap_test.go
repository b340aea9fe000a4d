package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
)

// `breaker` shows the quarantine cap, and the faults waiting once reached.
func TestBreakerQuarantineCap(t *testing.T) {
	f := newFixture(t)
	at := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	f.console.Detach(f.ctrl)
	f.console.Attach(consoletest.New(console.Breaker{Tripped: true, Used: 10, Budget: 10, Window: time.Hour,
		QuarantineCap: &console.QuarantineCap{Fraction: 0.1, Limit: 10, GPUNodes: 100, Held: 10, ReadAt: at, TripsBreaker: true,
			Waiting: []console.CapWaiting{{FaultID: "f-dbe", Type: "gpu.memory.dbe", Severity: "P1", Node: "gpu050", Since: at, Last: at}}}}))
	code, out, errOut := f.run(t, "breaker")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "state: tripped\nquarantines: 10 of 10 within 1h0m0s\nquarantine cap: 10 of 10 GPU nodes held (max_quarantined_fraction 0.1 of 100)\n"+
		"QUARANTINE CAP REACHED: 1 fault(s) refused and waiting (runbook RemediationQuarantineCapReached)\n")
	assert.Regexp(t, `(?m)^P1\s+gpu.memory.dbe\s+gpu050\s+2026-03-01 10:05:00Z\s+f-dbe$`, out)

	f.console.Attach(consoletest.New(console.Breaker{Window: time.Hour, QuarantineCap: &console.QuarantineCap{Fraction: 0.1}}))
	code, out, _ = f.run(t, "breaker")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "quarantine cap: not read yet\n")
	assert.NotContains(t, out, "REACHED")
}
