package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// Which replica acts. With a Kubernetes Lease configured, its holder; else,
// when this collector runs a gpu_faults receiver, the member of its
// single-owner consumer group that holds the partitions (the one that gets
// the fault records: the group is the election); else this replica alone.
// Every change (a record's actions, a release, a breaker reset, an
// acknowledgement, a release after the verification window) passes
// e.leader.IsLeader under e.mu, so a standby never touches a node.

// alwaysLeader is the Leader when nothing elects: a single replica, or a
// platform without leader election. Documented in README.md.
type alwaysLeader struct{ self string }

func (alwaysLeader) IsLeader() bool { return true }

func (l alwaysLeader) Role() console.Role {
	me := ownership.Member{Name: l.self}
	return console.Role{Election: console.ElectionNone, Status: ownership.Status{Role: ownership.RoleOwner, Self: me, Owner: me}}
}

// ownerLeader is the Leader of a collector with a gpu_faults receiver:
// leading while the receiver holds the partitions.
type ownerLeader struct {
	election ownership.Election
}

func (l ownerLeader) IsLeader() bool { return l.election.Status().Role == ownership.RoleOwner }

func (l ownerLeader) Role() console.Role {
	return console.Role{Election: console.ElectionGPUFaults, Status: l.election.Status()}
}

// leaseHolder is the Kubernetes Lease's Leader as the console sees it.
type leaseHolder interface {
	IsLeader() bool
	Identity() string
	Holder() string
}

// role is this replica's place in the election, for the console and the
// refusals.
func (e *remediationExporter) role() console.Role {
	switch l := e.leader.(type) {
	case interface{ Role() console.Role }:
		return l.Role()
	case leaseHolder:
		st := ownership.Status{Role: ownership.RoleStandby, Self: ownership.Member{Name: l.Identity()}}
		if l.IsLeader() {
			st.Role = ownership.RoleOwner
		}
		if h := l.Holder(); h != "" {
			st.Owner = ownership.Member{Name: h}
		}
		return console.Role{Election: console.ElectionLease, Status: st}
	}
	st := ownership.Status{Role: ownership.RoleStandby, Self: ownership.Member{Name: e.replica}}
	if e.leader.IsLeader() {
		st.Role, st.Owner = ownership.RoleOwner, st.Self
	}
	return console.Role{Election: console.ElectionLease, Status: st}
}

// notOwner is nil on the replica that acts, else the refusal naming the
// owner. Callers hold e.mu.
func (e *remediationExporter) notOwner() error {
	if e.leader.IsLeader() {
		return nil
	}
	return &console.NotOwnerError{Role: e.role()}
}

// elect picks the Leader at Start when none was configured: the gpu_faults
// receiver's election when this collector has the election extension (the
// receiver offers it there at its own Start, after this one: until then
// this replica is electing and acts on nothing), else this replica alone.
// A gpu_faults receiver without the extension fails at its Start, and the
// extension fails the collector at Ready when no receiver offers: neither
// "every replica acts" nor "nobody ever acts" passes silently.
func (e *remediationExporter) elect(host component.Host) error {
	if !e.electAtStart {
		return nil
	}
	find := e.findElection
	if find == nil {
		find = ownership.FromHost
	}
	id, seam, err := find(host)
	if err != nil {
		return fmt.Errorf("remediationexporter: which replica acts: %w", err)
	}
	if seam == nil {
		e.logger.Info("remediation: no election extension (no gpu_faults receiver) and no Lease: this replica acts alone")
		return nil
	}
	e.leader = ownerLeader{election: seam.Follow(e.id)}
	e.logger.Info("remediation: the replica owning the gpu_faults partitions acts; the others are standbys whose controls are refused",
		zap.String("election", id.String()))
	return nil
}

// refuseControl audits a console control refused on a replica that does
// not act (entry prefilled), counts it under action when it is one of the
// decisions', logs it, and returns the refusal. Callers hold e.mu.
func (e *remediationExporter) refuseControl(entry audit.Entry, action string, err error) error {
	e.record(withDecision(entry, audit.DecisionSkipped, err.Error()))
	if action != "" {
		e.countDecision(e.lifeCtx, action, outcomeSkipped, "")
	}
	e.logger.Warn("remediation: console control refused on a replica that does not act",
		zap.String("step", entry.Step), zap.String("node", entry.Node), zap.String("operator", entry.Operator), zap.Error(err))
	return err
}
