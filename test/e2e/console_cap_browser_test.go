//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/faultconsoletest"
)

// TestConsoleBrowserQuarantineCapBanner: the page in headless Chromium
// shows the quarantine cap's banner while faults the cap refused wait
// (the breaker's answer says so), naming them and what to do, and hides it
// once nothing waits.
func TestConsoleBrowserQuarantineCapBanner(t *testing.T) {
	fc := faultconsoletest.Start(t, "e2e", nil)
	c := fc.Extension.(console.Console)
	at := time.Now().Add(-5 * time.Minute).UTC()
	reached := consoletest.New(console.Breaker{Tripped: true, Used: 10, Budget: 10, Window: time.Hour,
		History: []console.BreakerEvent{{Time: at, Event: "tripped", Reason: "circuit breaker tripped by the quarantine cap: gpu.memory.dbe f-dbe (P1) on gpu050 refused"}},
		QuarantineCap: &console.QuarantineCap{Fraction: 0.1, Limit: 10, GPUNodes: 100, Held: 10, ReadAt: at, TripsBreaker: true,
			Waiting: []console.CapWaiting{{FaultID: "f-dbe", Type: "gpu.memory.dbe", Severity: "P1", Node: "gpu050", Since: at, Last: at}}}})
	c.Attach(reached)

	ctx := startBrowser(t, 1400, 1000, 3*time.Minute)
	poll := func(what, expr string) { t.Helper(); pollUntil(t, ctx, time.Minute, what, expr) }
	signIn(t, ctx, fc.BaseURL, faultconsoletest.Token)
	poll("the banner", `!document.getElementById("cap-banner").classList.contains("hidden")`)
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("cap-banner")))
	require.NoError(t, err)
	assert.Contains(t, text, "Quarantine cap reached: 10 of the 10 GPU nodes remediation may hold (max_quarantined_fraction 0.1 of 100) are quarantined")
	assert.Contains(t, text, "1 fault(s) it refused wait: P1 gpu.memory.dbe on gpu050")
	assert.Contains(t, text, "release the false ones, then reset the breaker")
	waiting, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("cap-banner").dataset.waiting`))
	require.NoError(t, err)
	assert.Equal(t, "1", waiting)
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.ID("cap-banner")))
	require.NoError(t, err)
	assert.Greater(t, len(shot), 1000, "the banner renders")

	// Nothing waits any more (the DBE was acted on): the banner goes at the
	// page's next refresh.
	c.Detach(reached)
	c.Attach(consoletest.New(console.Breaker{Window: time.Hour,
		QuarantineCap: &console.QuarantineCap{Fraction: 0.1, Limit: 10, GPUNodes: 100, Held: 10, ReadAt: at, TripsBreaker: true}}))
	poll("the banner to go", `document.getElementById("cap-banner").classList.contains("hidden") && document.getElementById("cap-banner").dataset.waiting === "0"`)
}
