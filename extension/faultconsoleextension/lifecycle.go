package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"fmt"
	"net/http"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// lifecycleSteps are the repair loop's steps in order, as GET
// /api/v1/nodes lists them for the page's strip.
func lifecycleSteps() []string {
	out := make([]string, len(repair.Steps))
	for i, s := range repair.Steps {
		out[i] = string(s)
	}
	return out
}

// wireNode is a quarantined node as the API shows it; now is the console's
// clock, for the time in the current step.
func wireNode(n console.QuarantinedNode, now time.Time) consoleclient.Node {
	return consoleclient.Node{
		Node: n.Node, FaultIDs: nonNil(n.FaultIDs), Actions: nonNil(n.Actions),
		Reason: n.Reason, Since: n.Since.UTC(), ReleasePending: n.ReleasePending,
		Lifecycle: wireLifecycle(n.Lifecycle, now),
	}
}

// wireLifecycle is a node's repair loop as the API shows it (nil: none).
// The time in the step is never negative: a Since ahead of the console's
// clock (another replica's clock, or none recorded) counts as 0.
func wireLifecycle(l *console.Lifecycle, now time.Time) *consoleclient.Lifecycle {
	if l == nil {
		return nil
	}
	out := &consoleclient.Lifecycle{
		Step: l.Step, Since: l.Since.UTC(), Repair: l.Repair, Attempt: l.Attempt,
		Alarm:         l.Step == string(repair.StepRMA),
		History:       make([]consoleclient.LifecycleStep, 0, len(l.History)),
		Verifications: make([]consoleclient.Verification, 0, len(l.Verifications)),
	}
	if !l.Since.IsZero() && now.After(l.Since) {
		out.InStepSeconds = now.Sub(l.Since).Seconds()
	}
	for _, h := range l.History {
		out.History = append(out.History, consoleclient.LifecycleStep{Step: h.Step, At: h.At.UTC(), Detail: h.Detail})
	}
	for _, v := range l.Verifications {
		out.Verifications = append(out.Verifications, consoleclient.Verification{At: v.At.UTC(), Checks: v.Checks, Passed: v.Passed, Detail: v.Detail})
	}
	return out
}

// node answers GET /api/v1/nodes/{node}: one quarantined node with its
// repair loop's history.
func (a *api) node(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	nodes, _, ok := a.quarantined(w, r)
	if !ok {
		return
	}
	for _, n := range nodes {
		if n.Node == name {
			writeJSON(w, http.StatusOK, wireNode(n, a.opts.Now()))
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("node %q is not quarantined by the remediation exporter", name))
}
