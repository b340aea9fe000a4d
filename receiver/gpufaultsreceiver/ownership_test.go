package gpufaultsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// Every member knows whether it owns the partitions and, when it does not,
// which member does, as that member advertised itself; after the owner
// leaves, the standby that took over says so, and what the remediation
// exporter of each collector follows through its election extension is
// that collector's receiver's status.
func TestOwnershipVisibleToEveryMember(t *testing.T) {
	brokers := newCluster(t)
	rc := newRecorder()
	start := func(name string) *member {
		cfg := testConfig(brokers)
		cfg.MemberName, cfg.ConsoleURL = name, "https://"+name+".gw.ns.svc:8787"
		return startMember(t, name, cfg, rc.member(name))
	}
	a := start("gw-a")
	// Alone in the group it is electing until its first assignment, then
	// the owner naming itself; a fast broker may have assigned it already
	// (a flake of an exact "electing" here under load).
	if sa := a.r.Status(); sa.Role != ownership.RoleElecting {
		assert.Equal(t, ownership.RoleOwner, sa.Role, "alone in the group, before or after the first assignment")
		assert.Equal(t, "gw-a", sa.Owner.Name, "alone in the group, it owns")
	}
	b := start("gw-b")
	self := func(m *member) ownership.Member {
		return ownership.Member{Name: m.name, Console: "https://" + m.name + ".gw.ns.svc:8787"}
	}
	var owner, standby *member
	waitFor(t, "one owner, one standby naming it", func() bool {
		sa, sb := a.r.Status(), b.r.Status()
		switch {
		case sa.Role == ownership.RoleOwner && sb.Role == ownership.RoleStandby && sb.Owner == self(a):
			owner, standby = a, b
		case sb.Role == ownership.RoleOwner && sa.Role == ownership.RoleStandby && sa.Owner == self(b):
			owner, standby = b, a
		default:
			return false
		}
		return true
	})
	st := owner.r.Status()
	assert.Equal(t, self(owner), st.Owner, "the owner names itself")
	assert.Equal(t, self(owner), st.Self)
	assert.Equal(t, "otelcol-gpu-remediation", st.Group)
	assert.Positive(t, st.Generation)
	assert.Equal(t, testPartitions, owner.owned())
	assert.Equal(t, self(standby), standby.r.Status().Self)

	owner.stop()
	waitFor(t, "the standby owns after the owner left", func() bool {
		s := standby.r.Status()
		return s.Role == ownership.RoleOwner && s.Owner == self(standby)
	})
	assert.Equal(t, ownership.RoleElecting, owner.r.Status().Role, "a stopped member holds nothing")
	found := standby.host.follow(t)
	require.NotNil(t, found, "the running member's election is offered")
	assert.Equal(t, ownership.RoleOwner, found.Status().Role)
	assert.Equal(t, self(standby), found.Status().Self, "each collector follows its own receiver")
	assert.Equal(t, ownership.RoleElecting, owner.host.follow(t).Status().Role, "the stopped member's collector acts on nothing")
	standby.stop()
	assert.Equal(t, ownership.RoleElecting, found.Status().Role, "a stopped receiver withdraws its election")
}
