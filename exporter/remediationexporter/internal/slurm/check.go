package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// Check implements actuator.Platform: it reads the node, the reservations
// and every node (for the counts), and changes nothing.
func (p *Platform) Check(ctx context.Context, req actuator.Request) (actuator.Eligibility, error) {
	_, node, missing, err := p.lookupNode(ctx, req.Node)
	if err != nil {
		return actuator.Eligibility{}, err
	}
	if missing != "" {
		return actuator.Eligibility{Skip: actuator.SkipNotFound, Detail: missing}, nil
	}
	res, leave, err := p.leaveAlone(ctx, node)
	if err != nil {
		return actuator.Eligibility{}, err
	}
	ours := res.Outcome == actuator.AlreadyDone
	if leave && !ours {
		return actuator.Eligibility{Skip: res.Outcome, Detail: res.Detail}, nil
	}
	nodes, err := p.transport.nodes(ctx)
	if err != nil {
		return actuator.Eligibility{}, fmt.Errorf("slurm: count GPU nodes: %w", err)
	}
	e := actuator.Eligibility{Ours: ours}
	for _, n := range nodes {
		if gresGPUs(n.Gres) > 0 {
			e.GPUNodes++
		}
		// A drain of ours counts whatever the node's GRES: fail closed.
		if n.unavailable() && p.ours(n.Reason) {
			e.Quarantined++
		}
	}
	return e, nil
}

// gresGPUs is how many GPUs a node's GRES string names: the sum over its
// gpu entries ("gpu", "gpu:8", "gpu:h100:8", "gpu:h100:8(S:0-1)"); 0 for
// "(null)", "" or only other GRES.
func gresGPUs(gres string) int {
	total := 0
	for _, item := range splitGres(gres) {
		if i := strings.IndexByte(item, '('); i >= 0 {
			item = item[:i] // socket affinity, e.g. (S:0-1)
		}
		fields := strings.Split(strings.TrimSpace(item), ":")
		if fields[0] != "gpu" {
			continue
		}
		switch n, err := strconv.Atoi(fields[len(fields)-1]); {
		case len(fields) == 1:
			total++ // "gpu": one
		case err == nil:
			total += max(n, 0)
		case len(fields) == 2:
			total++ // "gpu:h100": a type, one
		}
	}
	return total
}

// splitGres splits a GRES list at the commas outside parentheses: the
// socket list "(S:0,1)" has its own.
func splitGres(gres string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range gres {
		switch r {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				out = append(out, gres[start:i])
				start = i + 1
			}
		}
	}
	return append(out, gres[start:])
}
