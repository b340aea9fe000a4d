package main

import (
	"fmt"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// printQuarantineCap prints the quarantine cap under the breaker: the
// nodes held against it and, once reached, the faults it refused that
// wait (most severe, oldest first). Nothing when it is not known (a dry
// run).
func printQuarantineCap(p *printer, c *consoleclient.QuarantineCap) {
	if c == nil {
		return
	}
	held := "not read yet"
	if c.ReadAt != nil {
		held = fmt.Sprintf("%d of %d GPU nodes held (max_quarantined_fraction %v of %d)", c.Held, c.Limit, c.Fraction, c.GPUNodes)
	}
	fmt.Fprintf(p.w, "quarantine cap: %s\n", held)
	if !c.Reached {
		return
	}
	fmt.Fprintf(p.w, "QUARANTINE CAP REACHED: %d fault(s) refused and waiting (runbook RemediationQuarantineCapReached)\n", len(c.Waiting))
	tw := table(p.w)
	fmt.Fprintln(tw, "SEVERITY\tTYPE\tNODE\tWAITING SINCE\tFAULT")
	for _, w := range c.Waiting {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Severity, w.Type, w.Node, fmtTime(w.Since), w.FaultID)
	}
	_ = tw.Flush()
}
