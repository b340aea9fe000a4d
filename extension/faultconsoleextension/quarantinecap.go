package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// wireQuarantineCap is the cap as GET /api/v1/breaker shows it; nil when
// the controller reported none.
func wireQuarantineCap(c *console.QuarantineCap) *consoleclient.QuarantineCap {
	if c == nil {
		return nil
	}
	out := &consoleclient.QuarantineCap{
		Reached: len(c.Waiting) > 0, Fraction: c.Fraction, Limit: c.Limit, GPUNodes: c.GPUNodes, Held: c.Held,
		TripsBreaker: c.TripsBreaker, Waiting: make([]consoleclient.CapWaiting, 0, len(c.Waiting)),
	}
	if !c.ReadAt.IsZero() {
		at := c.ReadAt.UTC()
		out.ReadAt = &at
	}
	for _, w := range c.Waiting {
		out.Waiting = append(out.Waiting, consoleclient.CapWaiting{FaultID: w.FaultID, Type: w.Type, Severity: w.Severity,
			Node: w.Node, Since: w.Since.UTC(), Last: w.Last.UTC()})
	}
	return out
}
