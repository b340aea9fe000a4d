//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/faultconsoletest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// TestConsoleLifecycleBrowser: the page in headless Chromium shows where
// each quarantined node is in the repair loop. gpu-node-07 moves through
// it (quarantined → repairing gpu_reset #1 → verifying → released) while
// gpu-node-12, whose GPU reset and reboot both failed their verification,
// waits in rma: the strip highlights the current step, says the time in
// it, the repair and its attempt and the last verification; rma is an
// alarm; each step's times are on hover and the history on expand, kept
// open across the page's refresh. The pictures of each step go to
// $CONSOLE_SCREENSHOT_DIR/lifecycle (make console-screenshots;
// docs/console.md).
func TestConsoleLifecycleBrowser(t *testing.T) {
	fc := faultconsoletest.Start(t, "e2e", nil)
	c := fc.Extension.(console.Console)
	now := time.Now().UTC().Truncate(time.Second)
	t0 := now.Add(-50 * time.Minute)
	c.RecordFault(console.Fault{ID: "f-dbe-07", Type: "gpu.memory.dbe", Severity: "P1", State: console.StateOpen, Node: "gpu-node-07",
		GPU: "GPU-5c3a9e21", Rank: -1, Step: -1, FirstSeen: t0, LastSeen: t0, Evidence: map[string]string{"dcgm.health.system": "memory"},
		Decision: "acted", Action: "cordon,taint,drain", Reason: "P1 fault"})
	c.RecordFault(console.Fault{ID: "f-xid-12", Type: "gpu.xid.79", Severity: "P1", State: console.StateOpen, Node: "gpu-node-12",
		GPU: "GPU-88d0f1b4", Rank: -1, Step: -1, FirstSeen: t0.Add(-3 * time.Hour), LastSeen: t0.Add(-3 * time.Hour),
		Evidence: map[string]string{"xid": "79"}, Decision: "acted", Action: "cordon,taint,drain", Reason: "P1 fault"})
	ctrl := consoletest.New(console.Breaker{Used: 2, Budget: 5, Window: time.Hour},
		console.QuarantinedNode{Node: "gpu-node-07", FaultIDs: []string{"f-dbe-07"}, Actions: []string{"cordon", "taint", "drain"},
			Reason: "P1 gpu.memory.dbe", Since: t0.Add(time.Minute)},
		console.QuarantinedNode{Node: "gpu-node-12", FaultIDs: []string{"f-xid-12"}, Actions: []string{"cordon", "taint", "drain"},
			Reason: "P1 gpu.xid.79", Since: t0.Add(-3 * time.Hour)})
	step := func(node string, s repair.Step, at time.Time, detail string) {
		t.Helper()
		require.NoError(t, ctrl.Step(node, s, at, detail))
	}
	// gpu-node-12: a GPU reset, a failed diagnostic, a reboot, failed
	// again: rma.
	r := t0.Add(-3 * time.Hour)
	step("gpu-node-12", repair.StepOnset, r, "XID 79 on GPU-88d0f1b4")
	step("gpu-node-12", repair.StepRecorded, r.Add(2*time.Second), "")
	step("gpu-node-12", repair.StepQuarantined, r.Add(5*time.Second), "cordon,taint,drain")
	step("gpu-node-12", repair.StepDrained, r.Add(4*time.Minute), "no process on the node's GPUs")
	require.NoError(t, ctrl.Repair("gpu-node-12", repair.ActionGPUReset, r.Add(5*time.Minute), "GPU 2"))
	step("gpu-node-12", repair.StepRepaired, r.Add(6*time.Minute), "reset done")
	step("gpu-node-12", repair.StepVerifying, r.Add(7*time.Minute), "dcgm_diag level 1")
	require.NoError(t, ctrl.Verify("gpu-node-12", r.Add(9*time.Minute), "dcgm_diag level 1", false, "PCIe replay errors on GPU 2"))
	require.NoError(t, ctrl.Repair("gpu-node-12", repair.ActionReboot, r.Add(10*time.Minute), "scontrol reboot ASAP nextstate=RESUME"))
	step("gpu-node-12", repair.StepRepaired, r.Add(19*time.Minute), "node back after the reboot")
	step("gpu-node-12", repair.StepVerifying, r.Add(20*time.Minute), "dcgm_diag level 1")
	require.NoError(t, ctrl.Verify("gpu-node-12", r.Add(22*time.Minute), "dcgm_diag level 1", false, "GPU 2 fell off the bus during the diagnostic"))
	require.NoError(t, ctrl.Repair("gpu-node-12", repair.ActionRMA, r.Add(23*time.Minute), "rma_review webhook with the evidence bundle"))
	step("gpu-node-12", repair.StepRMA, r.Add(23*time.Minute), "every repair failed")
	rmaHistory := 12
	// gpu-node-07 starts quarantined.
	step("gpu-node-07", repair.StepOnset, t0, "DCGM health: memory, DBE on GPU 3")
	step("gpu-node-07", repair.StepRecorded, t0.Add(time.Second), "")
	step("gpu-node-07", repair.StepQuarantined, t0.Add(time.Minute), "cordon,taint,drain")
	c.Attach(ctrl)

	dir := t.TempDir()
	if d := os.Getenv("CONSOLE_SCREENSHOT_DIR"); d != "" {
		dir = filepath.Join(d, "lifecycle")
	}
	ctx := startBrowser(t, 1400, 900, 5*time.Minute)
	poll := func(what, expr string) { t.Helper(); pollUntil(t, ctx, time.Minute, what, expr) }
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		require.NoError(t, err, expr)
		return s
	}
	row := func(node string) string {
		return fmt.Sprintf(`document.querySelector('#nodes-table tr.lifecycle-row[data-lifecycle-node=%q]')`, node)
	}
	// at waits until node's strip shows step as the current one, checks
	// the strip (every step of the loop in order, the current one alone
	// highlighted, the steps before it visited marked done) and takes the
	// picture.
	at := func(node string, s repair.Step, done []string, picture string) {
		t.Helper()
		poll(node+" at "+string(s), fmt.Sprintf(`%s !== null && %s.dataset.step === %q`, row(node), row(node), s))
		got := eval(fmt.Sprintf(`[...%s.querySelectorAll("ol.lc-strip li")].map(li => li.dataset.step + (li.classList.contains("lc-current") ? "*" : "") + (li.classList.contains("lc-done") ? "+" : "")).join(" ")`, row(node)))
		var want []string
		for _, st := range repair.Steps {
			w := string(st)
			if st == s {
				w += "*"
			}
			for _, d := range done {
				if d == string(st) {
					w += "+"
				}
			}
			want = append(want, w)
		}
		assert.Equal(t, strings.Join(want, " "), got, "%s's strip", node)
		assert.Equal(t, "step", eval(fmt.Sprintf(`%s.querySelector("li.lc-current").getAttribute("aria-current")`, row(node))))
		if picture != "" {
			shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.ID("nodes-section")))
			require.NoError(t, err)
			saveScreenshot(t, dir, picture, shot)
		}
	}

	signIn(t, ctx, fc.BaseURL, faultconsoletest.Token)
	at("gpu-node-07", repair.StepQuarantined, []string{"onset", "recorded"}, "1-quarantined.png")
	assert.Regexp(t, `^quarantined for \d+m \d\ds \(since `+regexp.QuoteMeta(fmtConsoleTime(t0.Add(time.Minute)))+`\)$`,
		eval(row("gpu-node-07")+`.querySelector(".lc-in-step").textContent`))
	assert.Equal(t, "not verified yet", eval(row("gpu-node-07")+`.querySelector(".lc-verify").textContent`))
	assert.Equal(t, "0", eval(fmt.Sprintf(`String(%s.querySelectorAll(".lc-repair").length)`, row("gpu-node-07"))), "no repair yet")

	// rma: an alarm.
	at("gpu-node-12", repair.StepRMA, []string{"onset", "recorded", "quarantined", "drained", "repairing", "repaired", "verifying"}, "")
	assert.Equal(t, "true", eval(fmt.Sprintf(`String(%s.classList.contains("lc-alarm-row") && %s.querySelector("li.lc-current").classList.contains("lc-alarm"))`, row("gpu-node-12"), row("gpu-node-12"))))
	assert.Equal(t, "rgb(179, 38, 30)", eval(`getComputedStyle(`+row("gpu-node-12")+`.querySelector("li.lc-current")).backgroundColor`), "the rma step is red")
	assert.Contains(t, eval(row("gpu-node-12")+`.querySelector(".lc-summary").textContent`), "RMA: every repair failed, the node waits for a human")
	assert.Equal(t, "repair rma #3", eval(row("gpu-node-12")+`.querySelector(".lc-repair").textContent`))
	assert.Equal(t, "last verification failed "+fmtConsoleTime(r.Add(22*time.Minute))+": dcgm_diag level 1 — GPU 2 fell off the bus during the diagnostic",
		eval(row("gpu-node-12")+`.querySelector(".lc-verify.lc-failed").textContent`))
	assert.Equal(t, "not a row of gpu-node-07", eval(fmt.Sprintf(`%s.classList.contains("lc-alarm-row") ? "alarm" : "not a row of gpu-node-07"`, row("gpu-node-07"))))
	// Hover: a step's times (the loop went through repairing twice and
	// more: every visit).
	assert.Equal(t, "repairing: "+fmtConsoleTime(r.Add(5*time.Minute))+" — gpu_reset #1: GPU 2; "+fmtConsoleTime(r.Add(10*time.Minute))+
		" — reboot #2: scontrol reboot ASAP nextstate=RESUME; "+fmtConsoleTime(r.Add(23*time.Minute))+" — rma #3: rma_review webhook with the evidence bundle",
		eval(row("gpu-node-12")+`.querySelector('li[data-step="repairing"]').title`))
	assert.Equal(t, "released: not reached", eval(row("gpu-node-12")+`.querySelector('li[data-step="released"]').title`))
	// Expand: the history, oldest first, and the verifications; it stays
	// open across the page's refresh.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.lifecycle-row[data-lifecycle-node="gpu-node-12"] details.lc-history summary`))))
	poll("the history open", row("gpu-node-12")+`.querySelector("details.lc-history").open`)
	hist := eval(row("gpu-node-12") + `.querySelector("table.lc-history-steps tbody").innerText`)
	lines := strings.Split(strings.TrimSpace(hist), "\n")
	require.Len(t, lines, rmaHistory, hist)
	assert.Equal(t, "onset\t"+fmtConsoleTime(r)+"\tXID 79 on GPU-88d0f1b4", lines[0])
	assert.Equal(t, "rma\t"+fmtConsoleTime(r.Add(23*time.Minute))+"\tevery repair failed", lines[rmaHistory-1])
	assert.Equal(t, "failed,failed", eval(`[...`+row("gpu-node-12")+`.querySelectorAll("table.lc-history-verifications tbody tr td:nth-child(3)")].map(td => td.textContent).join(",")`))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](row("gpu-node-12")+`.dataset.before = "refresh"; true`))
	require.NoError(t, err)
	poll("the page's refresh", row("gpu-node-12")+`.dataset.before === undefined`)
	assert.Equal(t, "true", eval(`String(`+row("gpu-node-12")+`.querySelector("details.lc-history").open)`), "the history stays open")
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(`tr.lifecycle-row[data-lifecycle-node="gpu-node-12"]`)))
	require.NoError(t, err)
	saveScreenshot(t, dir, "rma.png", shot)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.lifecycle-row[data-lifecycle-node="gpu-node-12"] details.lc-history summary`))))
	poll("the history closed", `!`+row("gpu-node-12")+`.querySelector("details.lc-history").open`)

	// gpu-node-07: drained, then a GPU reset.
	step("gpu-node-07", repair.StepDrained, now.Add(-20*time.Minute), "no process on GPU 3")
	require.NoError(t, ctrl.Repair("gpu-node-07", repair.ActionGPUReset, now.Add(-19*time.Minute), "GPU 3 (nvidia-smi --gpu-reset -i 3)"))
	at("gpu-node-07", repair.StepRepairing, []string{"onset", "recorded", "quarantined", "drained"}, "2-repairing.png")
	assert.Equal(t, "repair gpu_reset #1", eval(row("gpu-node-07")+`.querySelector(".lc-repair").textContent`))
	assert.Regexp(t, `^repairing for 19m \d\ds \(since `, eval(row("gpu-node-07")+`.querySelector(".lc-in-step").textContent`))

	// Repaired, verifying.
	step("gpu-node-07", repair.StepRepaired, now.Add(-18*time.Minute), "reset done")
	step("gpu-node-07", repair.StepVerifying, now.Add(-17*time.Minute), "dcgm_diag level 2")
	at("gpu-node-07", repair.StepVerifying, []string{"onset", "recorded", "quarantined", "drained", "repairing", "repaired"}, "3-verifying.png")

	// Passed, released.
	require.NoError(t, ctrl.Verify("gpu-node-07", now.Add(-5*time.Minute), "dcgm_diag level 2", true, "all tests passed"))
	step("gpu-node-07", repair.StepReleased, now.Add(-4*time.Minute), "uncordoned, taint removed")
	at("gpu-node-07", repair.StepReleased, []string{"onset", "recorded", "quarantined", "drained", "repairing", "repaired", "verifying", "verified"}, "4-released.png")
	assert.Equal(t, "last verification passed "+fmtConsoleTime(now.Add(-5*time.Minute))+": dcgm_diag level 2 — all tests passed",
		eval(row("gpu-node-07")+`.querySelector(".lc-verify.lc-passed").textContent`))
	assert.Empty(t, ctrl.Calls(), "looking changes nothing")
}

// fmtConsoleTime is a time as the page writes it (fmtTime).
func fmtConsoleTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
