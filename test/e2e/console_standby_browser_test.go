//go:build e2e

package e2e

import (
	"bytes"
	"context"
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

	var browserLog bytes.Buffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.CombinedOutput(&browserLog))
	defer cancelAlloc()
	ctx, cancelTime := context.WithTimeout(allocCtx, 3*time.Minute) // against a hang only
	defer cancelTime()
	ctx, cancel := chromedp.NewContext(ctx)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("chromium output:\n%s", browserLog.String())
		}
	}()
	poll := func(what, expr string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Minute), chromedp.WithPollingInterval(100*time.Millisecond)))
		require.NoError(t, err, "waiting for %s (%s)", what, expr)
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fc.BaseURL+"/"),
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), faultconsoletest.Token),
		chromedp.Click(chromedp.ID("token-submit")),
	))
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
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(fwd.BaseURL+"/"),
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), faultconsoletest.Token),
		chromedp.Click(chromedp.ID("token-submit")),
	))
	poll("the forwarding standby's banner", `document.getElementById("role-banner").textContent.includes("forwarded to it and performed there")`)

	ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleOwner, Self: owner, Owner: owner}})
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload())) // the token is kept for the session
	poll("the owner's page connected", `document.getElementById("status").textContent.includes("owner")`)
	poll("no banner on the owner", `document.getElementById("role-banner").classList.contains("hidden")`)
}
