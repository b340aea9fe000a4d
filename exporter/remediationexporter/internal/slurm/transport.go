package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"context"
	"errors"
	"strings"
	"time"
)

// transport is the small seam between the platform logic and the two ways
// of talking to Slurm: the scontrol binary and slurmrestd.
type transport interface {
	// node reads one node; errNodeNotFound when Slurm does not know it.
	node(ctx context.Context, name string) (nodeInfo, error)
	// nodes reads every node (the breaker's recount).
	nodes(ctx context.Context) ([]nodeInfo, error)
	// reservations reads every reservation.
	reservations(ctx context.Context) ([]reservation, error)
	// drain sets State=DRAIN with reason.
	drain(ctx context.Context, name, reason string) error
	// resume sets State=RESUME.
	resume(ctx context.Context, name string) error
}

// rebooter is a transport that can ask slurmctld for a reboot (scontrol;
// slurmrestd has no reboot endpoint).
type rebooter interface {
	// reboot runs `scontrol reboot ASAP nextstate=DOWN reason=<reason>`.
	reboot(ctx context.Context, name, reason string) error
}

var errNodeNotFound = errors.New("slurm: node not found")

// nodeInfo is what the platform needs of a node.
type nodeInfo struct {
	Name string
	// States are upper-case base state and flags, e.g. [IDLE DRAIN].
	States     []string
	Reason     string
	ReasonTime time.Time // zero when unknown
	// Gres is the node's configured GRES, e.g. "gpu:h100:8(S:0-1),nic:1";
	// "" or "(null)" when none.
	Gres string
	// NextState is the state after a pending reboot ("DOWN", "RESUME");
	// "" when none is set or the transport does not say.
	NextState string
	// BootTime is when the node last booted (zero when unknown).
	BootTime time.Time
	// CPUAlloc is how many CPUs jobs hold on the node; -1 when unknown.
	CPUAlloc int
}

// has reports whether the node carries state or flag st.
func (n nodeInfo) has(st string) bool {
	for _, s := range n.States {
		if s == st {
			return true
		}
	}
	return false
}

// unavailable reports whether someone (us or another writer) took the node
// out of service: drained, draining, down or failed.
func (n nodeInfo) unavailable() bool {
	for _, st := range n.States {
		switch st {
		case "DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING":
			return true
		}
	}
	return false
}

// reservation is what the maintenance exclusion needs.
type reservation struct {
	Name   string
	Nodes  string // Slurm hostlist expression, e.g. gpu-node[1-4,7]
	Flags  []string
	Active bool
}

func (r reservation) maintenance() bool {
	for _, f := range r.Flags {
		if strings.EqualFold(f, "MAINT") {
			return true
		}
	}
	return false
}

// splitStates turns "IDLE+DRAIN", "DOWN*+DRAIN" or "idle" into upper-case
// states; a trailing '*' (not responding) becomes NOT_RESPONDING.
func splitStates(s string) []string {
	var out []string
	for _, part := range strings.Split(s, "+") {
		part = strings.ToUpper(strings.TrimSpace(part))
		if strings.HasSuffix(part, "*") {
			part = strings.TrimRight(part, "*")
			out = append(out, "NOT_RESPONDING")
		}
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}
