package consoletest // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"

import (
	"fmt"
	"slices"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// The controller's nodes move through the repair loop as the tests say:
// Step, Repair and Verify change a held node's Lifecycle as the
// remediation exporter would (the order is the caller's: the fake checks
// only the names), so the page, the API and the CLI can be shown a node
// at every step.

// Step moves node to step at at, with detail in its history (the node
// gets a Lifecycle if it had none).
func (c *Controller) Step(node string, step repair.Step, at time.Time, detail string) error {
	if !slices.Contains(repair.Steps, step) {
		return fmt.Errorf("step %q is not one of internal/repair's Steps %v", step, repair.Steps)
	}
	return c.change(node, func(l *console.Lifecycle) {
		l.Step, l.Since = string(step), at
		l.History = append(l.History, console.LifecycleStep{Step: string(step), At: at, Detail: detail})
	})
}

// Repair starts the next repair on node: the repairing step, action and
// the attempt counted up.
func (c *Controller) Repair(node string, action repair.Action, at time.Time, detail string) error {
	switch action {
	case repair.ActionGPUReset, repair.ActionReboot, repair.ActionRMA:
	default:
		return fmt.Errorf("repair %q is not one of internal/repair's actions", action)
	}
	return c.change(node, func(l *console.Lifecycle) {
		l.Repair, l.Attempt = string(action), l.Attempt+1
		l.Step, l.Since = string(repair.StepRepairing), at
		l.History = append(l.History, console.LifecycleStep{Step: string(repair.StepRepairing), At: at,
			Detail: fmt.Sprintf("%s #%d: %s", action, l.Attempt, detail)})
	})
}

// Verify records a verification of node. A pass moves it to verified; a
// failure leaves the step to the caller (the next Repair, or Step to
// rma).
func (c *Controller) Verify(node string, at time.Time, checks string, passed bool, detail string) error {
	return c.change(node, func(l *console.Lifecycle) {
		l.Verifications = append(l.Verifications, console.Verification{At: at, Checks: checks, Passed: passed, Detail: detail})
		if passed {
			l.Step, l.Since = string(repair.StepVerified), at
			l.History = append(l.History, console.LifecycleStep{Step: string(repair.StepVerified), At: at, Detail: checks + " passed"})
		}
	})
}

// change applies f to node's Lifecycle (a fresh copy: what Quarantined
// returned earlier does not change).
func (c *Controller) change(node string, f func(*console.Lifecycle)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.nodes, func(n console.QuarantinedNode) bool { return n.Node == node })
	if i < 0 {
		return fmt.Errorf("node %q is not quarantined", node)
	}
	l := cloneLifecycle(c.nodes[i].Lifecycle)
	if l == nil {
		l = &console.Lifecycle{}
	}
	f(l)
	c.nodes[i].Lifecycle = l
	return nil
}

func cloneLifecycle(l *console.Lifecycle) *console.Lifecycle {
	if l == nil {
		return nil
	}
	out := *l
	out.History = slices.Clone(l.History)
	out.Verifications = slices.Clone(l.Verifications)
	return &out
}

// cloneNodes copies nodes with their lifecycles.
func cloneNodes(nodes []console.QuarantinedNode) []console.QuarantinedNode {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].FaultIDs = slices.Clone(out[i].FaultIDs)
		out[i].Actions = slices.Clone(out[i].Actions)
		out[i].Lifecycle = cloneLifecycle(out[i].Lifecycle)
	}
	return out
}
