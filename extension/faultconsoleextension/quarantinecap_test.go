package faultconsoleextension

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
)

// The breaker's answer carries the quarantine cap: reached while faults it
// refused wait, with the nodes held of the limit; absent when the
// controller knows none (a dry run).
func TestAPIBreakerQuarantineCap(t *testing.T) {
	f := newFixture(t, false)
	readAt := f.onset.Add(30 * time.Minute)
	ctrl := consoletest.New(console.Breaker{Tripped: true, Used: 10, Budget: 10, Window: time.Hour,
		QuarantineCap: &console.QuarantineCap{Fraction: 0.1, Limit: 10, GPUNodes: 100, Held: 10, ReadAt: readAt, TripsBreaker: true,
			Waiting: []console.CapWaiting{{FaultID: "f-dbe", Type: "gpu.memory.dbe", Severity: "P1", Node: "gpu050",
				Since: f.onset, Last: readAt}}}})
	f.store.Attach(ctrl)
	var b consoleclient.Breaker
	f.call(t, "GET", "/api/v1/breaker", "", 200, &b)
	require.NotNil(t, b.QuarantineCap)
	assert.Equal(t, consoleclient.QuarantineCap{Reached: true, Fraction: 0.1, Limit: 10, GPUNodes: 100, Held: 10, ReadAt: &readAt,
		TripsBreaker: true, Waiting: []consoleclient.CapWaiting{{FaultID: "f-dbe", Type: "gpu.memory.dbe", Severity: "P1",
			Node: "gpu050", Since: f.onset, Last: readAt}}}, *b.QuarantineCap)

	// Nothing waits: not reached, an empty list (not null).
	f.store.Detach(ctrl)
	f.store.Attach(consoletest.New(console.Breaker{Window: time.Hour, QuarantineCap: &console.QuarantineCap{Fraction: 0.1}}))
	w := f.do(t, "GET", "/api/v1/breaker", "", withToken(testToken))
	require.Equal(t, 200, w.Code)
	assert.Contains(t, w.Body.String(), `"quarantine_cap":{"reached":false,"fraction":0.1,"limit":0,"gpu_nodes":0,"held":0,"trips_breaker":false,"waiting":[]}`)

	// No cap known: no key.
	f.store.Attach(consoletest.New(console.Breaker{Window: time.Hour}))
	w = f.do(t, "GET", "/api/v1/breaker", "", withToken(testToken))
	require.Equal(t, 200, w.Code)
	assert.NotContains(t, w.Body.String(), "quarantine_cap")
}

// The page has the banner, hidden until the breaker's answer says the cap
// is reached (the browser test drives it: test/e2e).
func TestPageQuarantineCapBanner(t *testing.T) {
	page := string(pageHTML)
	assert.Contains(t, page, `<div id="cap-banner" class="hidden" role="alert" data-waiting="0"></div>`)
	assert.Contains(t, page, "showCap(b.quarantine_cap)")
	assert.True(t, strings.Index(page, `id="cap-banner"`) < strings.Index(page, `id="faults-section"`), "above the tables")
}
