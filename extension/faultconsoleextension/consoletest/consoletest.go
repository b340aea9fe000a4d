// Package consoletest is a recording console.Controller for tests of the
// fault console, its CLI and its page: it holds quarantined nodes and a
// breaker in memory and records every call with its operator.
package consoletest // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// Call is one recorded change: Method is ResetBreaker, Release or
// Acknowledge; Target the node or fault ID ("" for the breaker).
type Call struct {
	Method   string
	Target   string
	Operator console.Operator
}

// Controller is a recording console.Controller. Set Err to make every call
// fail with it.
type Controller struct {
	mu      sync.Mutex
	nodes   []console.QuarantinedNode
	breaker console.Breaker
	calls   []Call
	err     error
	now     func() time.Time
	role    console.Role
}

var _ console.Controller = (*Controller)(nil)

// New returns a controller holding nodes (with their lifecycles, if any),
// with the breaker b.
func New(b console.Breaker, nodes ...console.QuarantinedNode) *Controller {
	return &Controller{nodes: cloneNodes(nodes), breaker: b, now: time.Now,
		role: console.Role{Election: console.ElectionNone, Status: ownership.Status{Role: ownership.RoleOwner}}}
}

// SetRole sets what Role answers (New: the owner, nothing elects). On any
// role but the owner every change is refused with a *console.NotOwnerError
// and not recorded, as the remediation exporter refuses it.
func (c *Controller) SetRole(r console.Role) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.role = r
}

// Role implements console.Controller.
func (c *Controller) Role() console.Role {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.role
}

// refusal is the error of a change: the one set, else a standby's.
// Callers hold c.mu.
func (c *Controller) refusal() error {
	if c.err != nil {
		return c.err
	}
	if c.role.Role != ownership.RoleOwner {
		return &console.NotOwnerError{Role: c.role}
	}
	return nil
}

// SetErr makes every later call fail with err (nil: succeed).
func (c *Controller) SetErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Calls returns the recorded changes in order.
func (c *Controller) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// Quarantined implements console.Controller.
func (c *Controller) Quarantined(context.Context) ([]console.QuarantinedNode, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	return cloneNodes(c.nodes), nil
}

// Breaker implements console.Controller.
func (c *Controller) Breaker(context.Context) (console.Breaker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return console.Breaker{}, c.err
	}
	b := c.breaker
	b.History = slices.Clone(b.History)
	return b, nil
}

// ResetBreaker implements console.Controller: it closes the breaker, zeroes
// its use and appends a reset event.
func (c *Controller) ResetBreaker(_ context.Context, op console.Operator) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refusal(); err != nil {
		return err
	}
	c.calls = append(c.calls, Call{Method: "ResetBreaker", Operator: op})
	c.breaker.Tripped = false
	c.breaker.Used = 0
	c.breaker.History = append(c.breaker.History, console.BreakerEvent{Time: c.now(), Event: "reset", By: op.Name, Reason: op.Reason})
	return nil
}

// Release implements console.Controller: it forgets the node.
func (c *Controller) Release(_ context.Context, node string, op console.Operator) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refusal(); err != nil {
		return "", err
	}
	i := slices.IndexFunc(c.nodes, func(n console.QuarantinedNode) bool { return n.Node == node })
	if i < 0 {
		return "", fmt.Errorf("node %q is not quarantined", node)
	}
	c.nodes = slices.Delete(c.nodes, i, i+1)
	c.calls = append(c.calls, Call{Method: "Release", Target: node, Operator: op})
	return "uncordoned " + node + " and removed its taint", nil
}

// Acknowledge implements console.Controller.
func (c *Controller) Acknowledge(_ context.Context, faultID string, op console.Operator) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refusal(); err != nil {
		return err
	}
	c.calls = append(c.calls, Call{Method: "Acknowledge", Target: faultID, Operator: op})
	return nil
}
