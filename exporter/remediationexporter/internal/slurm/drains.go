package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"strings"
	"sync"
	"time"
)

// Our prefix on a drain reason says who wrote it, but not that the drain
// is still the one we wrote: a human can resume our drain and drain the
// node again later for their own reasons, even with a reason copied from
// ours. Slurm keeps no history and no owner, but stamps every new reason
// with its time (scontrol's "[user@time]", slurmrestd's reason_changed_at).
// So a drain is still ours while the node's reason and reason time are
// those we read back right after our drain; any later drain, whatever its
// words, has a later time and is left alone.
//
// The marks live in this process. A node drained before a restart is not
// released automatically anyway (the exporter waits for a human); after a
// failover, the new leader adopts a drain when it acts again on a fault the
// reason names (Quarantine's already-done path), so it can release it.
// Reason times have one-second resolution: a human who resumes and drains
// again within the second of our drain is not told apart.

// drainMark is a drain this process wrote: its reason and slurmctld's time
// on it (zero when it could not be read back: then the reason alone).
type drainMark struct {
	reason string
	at     time.Time
	// reboot: the reason is our reboot's (repair.go), to which slurmctld
	// itself appends as the reboot goes (" : reboot issued", then
	// " : reboot complete" or " : reboot timed out"), each time with a new
	// reason time.
	reboot bool
}

// still reports whether node carries the drain m describes.
func (m drainMark) still(node nodeInfo) bool {
	if node.Reason == m.reason {
		return m.at.IsZero() || node.ReasonTime.Equal(m.at)
	}
	if !m.reboot || !strings.HasPrefix(node.Reason, m.reason) {
		return false
	}
	// Only slurmctld's own suffixes, in its order, and no earlier time.
	rest := strings.TrimPrefix(node.Reason[len(m.reason):], rebootIssued)
	if rest != "" && rest != rebootComplete && rest != rebootTimedOut {
		return false
	}
	return m.at.IsZero() || !node.ReasonTime.Before(m.at)
}

func (m drainMark) String() string {
	if m.at.IsZero() {
		return strings.TrimSpace(m.reason)
	}
	return m.reason + " at " + m.at.Format(time.DateTime)
}

// drainMarks is the set of drains this process holds, per node name.
type drainMarks struct {
	mu    sync.Mutex
	marks map[string]drainMark
}

func (d *drainMarks) record(node string, m drainMark) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.marks == nil {
		d.marks = make(map[string]drainMark)
	}
	d.marks[node] = m
}

func (d *drainMarks) get(node string) (drainMark, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.marks[node]
	return m, ok
}

func (d *drainMarks) forget(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.marks, node)
}
