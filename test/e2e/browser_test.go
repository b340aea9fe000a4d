//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// startBrowser starts a headless Chromium of width x height for one test
// and returns its context, which ends at deadline (only against a hang:
// each step polls). Chromium's own output is logged if the test fails.
func startBrowser(t *testing.T, width, height int, deadline time.Duration) context.Context {
	t.Helper()
	var browserLog bytes.Buffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in the test container
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.CombinedOutput(&browserLog),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancelTime := context.WithTimeout(allocCtx, deadline)
	t.Cleanup(cancelTime)
	ctx, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chromium output:\n%s", browserLog.String())
		}
	})
	return ctx
}

// pollUntil waits up to timeout for the JavaScript expression expr to be
// true on the page; what names it in the failure.
func pollUntil(t *testing.T, ctx context.Context, timeout time.Duration, what, expr string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond)))
	require.NoError(t, err, "waiting for %s (%s)", what, expr)
}

// signIn opens the console at baseURL and gives it token.
func signIn(t *testing.T, ctx context.Context, baseURL, token string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(baseURL+"/"),
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), token),
		chromedp.Click(chromedp.ID("token-submit")),
	))
}
