//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/faultconsoletest"
)

// The fault console's page in a real headless Chromium (Debian's chromium
// package: apt-get install -y --no-install-recommends chromium).

// chromiumNames are the browser binaries looked for on PATH, after
// $CHROMIUM_PATH.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromium returns the browser's path; none fails the test (never skips).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CHROMIUM_PATH=%s: %v", p, err)
		}
		return p
	}
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no Chromium found on PATH (looked for %s): install it with `apt-get install -y --no-install-recommends chromium` (make test-deps) or set CHROMIUM_PATH",
		strings.Join(chromiumNames, ", "))
	return ""
}

// consoleExpectations are what driveConsole checks the page shows.
type consoleExpectations struct {
	// FaultIDs are faults the Faults table must list.
	FaultIDs []string
	// Job is the job whose heatmap is checked; Ranks and Steps its size (0:
	// any).
	Job          string
	Ranks, Steps int
	// Stragglers are the cells ("rank:step") that must be marked with a
	// straggler verdict, and no other.
	Stragglers []string
	// StragglerRanks, when Stragglers is nil: every cell marked with a
	// confirmed verdict (straggler.*) is of one of these ranks, and each
	// has at least one; a real run's verdict steps are not known in
	// advance, and a single step flagged in noise ("flagged") may be
	// anywhere.
	StragglerRanks []int64
	// BlindJob, when set, is a job whose step records cannot show a
	// straggler (issue 30): its view must say so above the heatmap, and
	// Job's view must not.
	BlindJob string
	// ResetBreaker: the breaker must show tripped, and is reset with
	// Operator and Reason.
	ResetBreaker     bool
	Operator, Reason string
}

// driveConsole drives the page at baseURL: the API refuses a request
// without the token; a wrong token shows an error; the token lists the
// faults and draws the heatmap with the straggler cells marked (screenshots
// of the page and of the heatmap go to screenshotDir); the tripped breaker
// is reset with a reason and confirmation and the page then shows it
// closed. The caller checks what reached its controller.
func driveConsole(t *testing.T, baseURL, token, screenshotDir string, want consoleExpectations) {
	t.Helper()
	// The API without the token: 401.
	resp, err := http.Get(baseURL + "/api/v1/faults")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API answered without the token")

	ctx := startBrowser(t, 1600, 1400, 5*time.Minute)
	poll := func(what, expr string) { t.Helper(); pollUntil(t, ctx, 2*time.Minute, what, expr) }
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
		require.NoError(t, err, "text of #%s", id)
		return s
	}

	// A wrong token: the page says so.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(baseURL+"/"),
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), "not-the-token-0000000000"),
		chromedp.Click(chromedp.ID("token-submit")),
	))
	poll("the 401 error", `!document.getElementById("error").classList.contains("hidden") && document.getElementById("error").textContent.includes("401")`)
	assert.Contains(t, text("error"), "refused")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#faults-table tbody tr[data-fault-id]").length`))
	require.NoError(t, err)
	assert.Zero(t, n, "no fault is listed with a wrong token")

	// The token: faults, heatmap.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), token),
		chromedp.Click(chromedp.ID("token-submit")),
		chromedp.SetValue(chromedp.ID("operator-input"), want.Operator),
	))
	for _, id := range want.FaultIDs {
		poll("fault "+id+" in #faults-table", fmt.Sprintf(`document.querySelector('#faults-table tr[data-fault-id=%q]') !== null`, id))
	}
	poll("the error banner to clear", `document.getElementById("error").classList.contains("hidden")`)

	// Select the job (the newest is selected by default).
	poll("the job in #job-select", fmt.Sprintf(`[...document.querySelectorAll("#job-select option")].some(o => o.value.split("\u0000")[0] === %q)`, want.Job))
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const s = document.getElementById("job-select");
		const o = [...s.options].find(o => o.value.split("\u0000")[0] === %q); s.value = o.value; s.dispatchEvent(new Event("change")); return true; })()`, want.Job)))
	require.NoError(t, err)
	cells := "> 0"
	if want.Ranks > 0 && want.Steps > 0 {
		cells = fmt.Sprintf("=== %d", want.Ranks*want.Steps)
	}
	poll("the heatmap's cells", fmt.Sprintf(`document.querySelector('#heatmap svg[data-job=%q]') !== null && document.querySelectorAll("#heatmap svg rect.cell").length %s`,
		want.Job, cells))
	marked, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#heatmap svg rect[data-verdict]:not([data-verdict=""])')].map(r => r.dataset.rank + ":" + r.dataset.step)`))
	require.NoError(t, err)
	slices.Sort(marked)
	if want.Stragglers != nil {
		wantMarked := slices.Clone(want.Stragglers)
		slices.Sort(wantMarked)
		assert.Equal(t, wantMarked, marked, "cells marked with a straggler verdict")
	} else {
		confirmed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#heatmap svg rect[data-verdict^="straggler."]')].map(r => r.dataset.rank + ":" + r.dataset.step)`))
		require.NoError(t, err)
		perRank := map[int64]int{}
		for _, c := range confirmed {
			var rank, step int64
			_, err := fmt.Sscanf(c, "%d:%d", &rank, &step)
			require.NoError(t, err, c)
			assert.Contains(t, want.StragglerRanks, rank, "a cell of rank %d is marked with a straggler verdict", rank)
			perRank[rank]++
		}
		for _, r := range want.StragglerRanks {
			assert.Positive(t, perRank[r], "no cell of rank %d is marked with a straggler verdict (marked: %v)", r, marked)
		}
	}
	markers, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#heatmap svg circle.marker").length`))
	require.NoError(t, err)
	assert.Equal(t, len(marked), markers, "one marker per verdict cell")
	outlined, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const r = document.querySelector('#heatmap svg rect.verdict'); return r ? getComputedStyle(r).stroke : ""; })()`))
	require.NoError(t, err)
	assert.Equal(t, "rgb(0, 0, 0)", outlined, "verdict cells are outlined")
	// Straggler cells are red (compute far above the step's median), the
	// others green. (A real run's link verdicts compute normally: checked
	// only on the planted heatmap.)
	if want.Stragglers != nil {
		hues, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...new Set([...document.querySelectorAll("#heatmap svg rect.cell")].map(r =>
		(r.dataset.verdict ? "verdict " : "normal ") + (parseInt(r.getAttribute("fill").slice(4)) > 60 ? "green" : "red")))].sort()`))
		require.NoError(t, err)
		assert.Equal(t, []string{"normal green", "verdict red"}, hues)
	}
	legend, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("legend-verdict")))
	require.NoError(t, err)
	assert.Contains(t, legend, "straggler verdict")

	// Screenshots.
	full, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	saveScreenshot(t, screenshotDir, "console.png", full)
	heat, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.ID("heatmap")))
	require.NoError(t, err)
	saveScreenshot(t, screenshotDir, "heatmap.png", heat)

	if want.BlindJob != "" {
		checkCommNote(t, ctx, want.Job, want.BlindJob)
	}

	if !want.ResetBreaker {
		return
	}
	// Reset the breaker: reason, confirmation, then closed.
	poll("the breaker tripped", `document.getElementById("breaker-state").textContent === "tripped" && !document.getElementById("breaker-reset").disabled`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("breaker-reset")),
		chromedp.WaitVisible(chromedp.ID("dialog-reason")),
		chromedp.SendKeys(chromedp.ID("dialog-reason"), want.Reason),
		chromedp.Click(chromedp.ID("dialog-ok")), // not confirmed yet: refused by the page
	))
	poll("the confirmation demand", `document.getElementById("dialog-error").textContent.includes("confirmation")`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("dialog-confirm")),
		chromedp.Click(chromedp.ID("dialog-ok")),
	))
	poll("the breaker closed", `document.getElementById("breaker-state").textContent === "closed" && document.getElementById("dialog-backdrop").classList.contains("hidden")`)
	poll("the reset in the breaker history", fmt.Sprintf(`document.getElementById("breaker-history").textContent.includes(%q)`, want.Reason))
	full, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	saveScreenshot(t, screenshotDir, "console-after-reset.png", full)
}

// checkCommNote selects blind, whose records cannot show a straggler: the
// note above its heatmap says so and its option in #job-select too; then
// job again, whose view has no note.
func checkCommNote(t *testing.T, ctx context.Context, job, blind string) {
	t.Helper()
	poll := func(what, expr string) { t.Helper(); pollUntil(t, ctx, 2*time.Minute, what, expr) }
	note := `document.getElementById("job-comm-note")`
	poll("no note on "+job+"'s view", note+`.classList.contains("hidden") && `+note+`.textContent === ""`)
	selectJob := func(name string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const s = document.getElementById("job-select");
		const o = [...s.options].find(o => o.value.split("\u0000")[0] === %q); s.value = o.value; s.dispatchEvent(new Event("change")); return true; })()`, name)))
		require.NoError(t, err)
	}
	poll("the blind job in #job-select", fmt.Sprintf(`[...document.querySelectorAll("#job-select option")].some(o => o.value.split("\u0000")[0] === %q && o.textContent.includes("cannot show stragglers"))`, blind))
	selectJob(blind)
	poll("the note on "+blind+"'s view", fmt.Sprintf(`document.querySelector('#heatmap svg[data-job=%q]') !== null && !%s.classList.contains("hidden") && %s.textContent.includes("cannot show a straggler")`,
		blind, note, note))
	visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](note+`.getBoundingClientRect().height > 0`))
	require.NoError(t, err)
	assert.True(t, visible, "the note takes room on the page")
	selectJob(job)
	poll("the note gone on "+job+"'s view", fmt.Sprintf(`document.querySelector('#heatmap svg[data-job=%q]') !== null && %s.classList.contains("hidden")`, job, note))
}

// saveScreenshot checks data is a non-trivial PNG and writes it.
func saveScreenshot(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err, "%s is not a PNG", name)
	b := img.Bounds()
	assert.Greater(t, b.Dx(), 200, "%s width", name)
	assert.Greater(t, b.Dy(), 100, "%s height", name)
	assert.Greater(t, len(data), 4_000, "%s is suspiciously small", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	t.Logf("screenshot %s (%dx%d, %d bytes)", p, b.Dx(), b.Dy(), len(data))
}

// TestConsoleBrowser runs the page against the extension started in this
// process with a recording controller: a 64-rank job with rank 17
// straggling in steps 21-30 of 30.
func TestConsoleBrowser(t *testing.T) {
	fc := faultconsoletest.Start(t, "e2e", func(cfg *faultconsoleextension.Config) {
		cfg.TraceURL = "http://jaeger.local:16686/trace/{trace_id}"
		cfg.LogsURL = "http://logs.local/select?fault={fault_id}"
	})
	ext, baseURL, token := fc.Extension, fc.BaseURL, faultconsoletest.Token

	c := ext.(console.Console)
	onset := time.Now().Add(-10 * time.Minute).UTC()
	c.RecordFault(console.Fault{ID: "fr-straggler-17", Type: "straggler", Severity: "P3", State: console.StateOpen, Node: "node-02",
		Job: "llama-64", Attempt: 0, Rank: 17, Step: 21, FirstSeen: onset, LastSeen: onset.Add(5 * time.Minute),
		Summary: "rank 17 slower than its peers", Evidence: map[string]string{"score": "7.1", "compute_ms": "265"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Decision: "skipped", Reason: "stragglers are not remediated"})
	c.RecordFault(console.Fault{ID: "fr-xid-79", Type: "xid_79", Severity: "P1", State: console.StateOpen, Node: "node-05", GPU: "GPU-5c3a",
		Rank: -1, Step: -1, FirstSeen: onset.Add(-time.Hour), LastSeen: onset, Evidence: map[string]string{"xid": "79"},
		Decision: "acted", Action: "cordon,taint", Reason: "P1 fault"})
	var stragglers []string
	for st := int64(1); st <= 30; st++ {
		for r := int64(0); r < 64; r++ {
			s := console.Step{Job: "llama-64", Step: st, Rank: r, Node: fmt.Sprintf("node-%02d", r/8),
				Compute: time.Duration(140+(r*7+st*3)%12) * time.Millisecond, Duration: 180 * time.Millisecond}
			if r == 17 && st >= 21 {
				s.Compute, s.Verdict, s.Score = 265*time.Millisecond, "straggler", 7.1
				stragglers = append(stragglers, fmt.Sprintf("%d:%d", r, st))
			}
			c.RecordStep(s)
		}
	}
	// A job whose records cannot show a straggler (issue 30).
	for st := int64(1); st <= 12; st++ {
		for r := int64(0); r < 8; r++ {
			c.RecordStep(console.Step{Job: "legacy-8", Step: st, Rank: r, Node: "node-09", Compute: 150 * time.Millisecond,
				Duration: 180 * time.Millisecond, NoCommSplit: st >= 10})
		}
	}
	ctrl := consoletest.New(console.Breaker{Tripped: true, Used: 5, Budget: 5, Window: time.Hour,
		History: []console.BreakerEvent{{Time: onset, Event: "tripped"}}},
		console.QuarantinedNode{Node: "node-05", FaultIDs: []string{"fr-xid-79"}, Actions: []string{"cordon", "taint"}, Reason: "P1 fault", Since: onset})
	c.Attach(ctrl)

	// Beside the demo's pictures (TestDemo), in their own folder.
	screenshots := t.TempDir()
	if dir := os.Getenv("CONSOLE_SCREENSHOT_DIR"); dir != "" {
		screenshots = filepath.Join(dir, "reset-flow")
	}
	driveConsole(t, baseURL, token, screenshots, consoleExpectations{
		FaultIDs: []string{"fr-straggler-17", "fr-xid-79"},
		Job:      "llama-64", Ranks: 64, Steps: 30, Stragglers: stragglers, BlindJob: "legacy-8",
		ResetBreaker: true, Operator: "e2e-operator", Reason: "checked the fleet after the XID storm",
	})

	calls := ctrl.Calls()
	require.Len(t, calls, 1, "one change reached the controller: %+v", calls)
	assert.Equal(t, "ResetBreaker", calls[0].Method)
	assert.Equal(t, "e2e-operator", calls[0].Operator.Name)
	assert.Equal(t, "checked the fleet after the XID storm", calls[0].Operator.Reason)
	assert.True(t, strings.HasPrefix(calls[0].Operator.Remote, "127.0.0.1:"), calls[0].Operator.Remote)
}
