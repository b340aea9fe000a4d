//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configtls"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/faultconsoletest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// A standby's page, in a real headless Chromium, shows a banner naming the
// owner and linking its console, saying whether its controls are refused
// or forwarded there; the owner's page shows none.
func TestConsoleStandbyBanner(t *testing.T) {
	fc := faultconsoletest.Start(t, "9.9.9", nil)
	ctrl := consoletest.New(console.Breaker{})
	owner := ownership.Member{Name: "otelcol-gpu-gateway-0", Console: "https://otelcol-gpu-gateway-0.otelcol-gpu-gateway.otelcol-gpu.svc:8787"}
	ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleStandby,
		Self: ownership.Member{Name: "otelcol-gpu-gateway-1"}, Owner: owner}})
	fc.Extension.(console.Console).Attach(ctrl)

	ctx := startBrowser(t, 1200, 900, 3*time.Minute)
	poll := func(what, expr string) { t.Helper(); pollUntil(t, ctx, time.Minute, what, expr) }
	signIn(t, ctx, fc.BaseURL, faultconsoletest.Token)
	poll("the standby banner", `!document.getElementById("role-banner").classList.contains("hidden")`)
	banner, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("role-banner")))
	require.NoError(t, err)
	assert.Contains(t, banner, "otelcol-gpu-gateway-1 is a standby: otelcol-gpu-gateway-0 owns the fault stream and acts")
	assert.Contains(t, banner, "releases, resets and acknowledgements here are refused", "forward off")
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#role-banner a").href`))
	require.NoError(t, err)
	assert.Equal(t, owner.Console+"/", href)
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("status")))
	require.NoError(t, err)
	assert.Contains(t, status, "standby")

	// A standby that forwards says its controls go to the owner.
	caFile, _, _ := writeTestCertificates(t, t.TempDir())
	fwd := faultconsoletest.Start(t, "9.9.9", func(c *faultconsoleextension.Config) {
		c.Forward = faultconsoleextension.ForwardConfig{Enabled: true, Timeout: 10 * time.Second,
			TLS: configtls.ClientConfig{Config: configtls.Config{CAFile: caFile}}}
	})
	fwd.Extension.(console.Console).Attach(ctrl)
	signIn(t, ctx, fwd.BaseURL, faultconsoletest.Token)
	poll("the forwarding standby's banner", `document.getElementById("role-banner").textContent.includes("forwarded to it and performed there")`)

	ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleOwner, Self: owner, Owner: owner}})
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload())) // the token is kept for the session
	poll("the owner's page connected", `document.getElementById("status").textContent.includes("owner")`)
	poll("no banner on the owner", `document.getElementById("role-banner").classList.contains("hidden")`)
}
