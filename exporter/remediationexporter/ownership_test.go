package remediationexporter

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/extension/electionextension"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// fakeElection is a gpu_faults receiver's election, set by the test.
type fakeElection struct {
	mu sync.Mutex
	st ownership.Status
}

func (f *fakeElection) Status() ownership.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

var (
	gw0 = ownership.Member{Name: "otelcol-gpu-gateway-0", Console: "https://otelcol-gpu-gateway-0.gw:8787"}
	gw1 = ownership.Member{Name: "otelcol-gpu-gateway-1", Console: "https://otelcol-gpu-gateway-1.gw:8787"}
)

// owner makes this replica (gw1) the owner; standby makes gw0 the owner.
func (f *fakeElection) owner()   { f.set(ownership.RoleOwner, gw1) }
func (f *fakeElection) standby() { f.set(ownership.RoleStandby, gw0) }
func (f *fakeElection) set(role ownership.Role, owner ownership.Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = ownership.Status{Role: role, Self: gw1, Owner: owner, Group: "otelcol-gpu-remediation", Generation: 3}
}

// electionID is the election extension's ID in the shipped configs.
var electionID = component.MustNewID(ownership.ExtensionType)

// newElectionExt starts the real election extension.
func newElectionExt(t *testing.T) extension.Extension {
	t.Helper()
	f := electionextension.NewFactory()
	set := extensiontest.NewNopSettings(f.Type())
	set.ID = electionID
	ext, err := f.Create(context.Background(), set, f.CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return ext
}

// withElection runs the exporter in a collector whose gpu_faults receiver
// offers el to the real election extension, which the exporter finds among
// the host's extensions and follows.
func withElection(t *testing.T, el ownership.Election) harnessOpt {
	ext := newElectionExt(t)
	withdraw, err := ext.(ownership.Seam).Offer(component.MustNewID("gpu_faults"), el)
	require.NoError(t, err)
	t.Cleanup(withdraw)
	return func(_ *Config, d *dependencies) {
		d.election = func(host component.Host) (component.ID, ownership.Seam, error) {
			exts := extHost{electionID: ext}
			for id, c := range host.GetExtensions() {
				exts[id] = c
			}
			return ownership.FromHost(exts)
		}
	}
}

// No Lease, a gpu_faults receiver: only the member owning its partitions
// acts. A standby's console controls are refused naming the owner, audited
// as refusals and counted, and touch neither the platform nor the state;
// the owner's succeed.
func TestStandbyRefusesEveryControl(t *testing.T) {
	el := &fakeElection{}
	el.owner()
	h := newHarness(t, withConsole, withElection(t, el))
	ctl := h.console.ctl(t)
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(r))
	h.platform.breaker.tripped = true
	role := ctl.Role()
	assert.Equal(t, console.ElectionGPUFaults, role.Election)
	assert.Equal(t, ownership.RoleOwner, role.Role)

	el.standby()
	role = ctl.Role()
	assert.Equal(t, ownership.RoleStandby, role.Role)
	assert.Equal(t, gw0, role.Owner, "the standby names the owner")
	assert.Equal(t, gw1, role.Self)

	var notOwner *console.NotOwnerError
	_, err := ctl.Release(context.Background(), "xl003", operator)
	require.ErrorAs(t, err, &notOwner)
	assert.EqualError(t, err, "otelcol-gpu-gateway-1 is a standby and never acts: otelcol-gpu-gateway-0 owns gpu_faults and acts; send controls to its console https://otelcol-gpu-gateway-0.gw:8787")
	require.ErrorAs(t, ctl.ResetBreaker(context.Background(), operator), &notOwner)
	require.ErrorAs(t, ctl.Acknowledge(context.Background(), r.ID, operator), &notOwner)

	_, rel := h.platform.counts()
	assert.Zero(t, rel, "no release called")
	assert.Zero(t, h.platform.breaker.resets, "no reset called")
	assert.True(t, h.platform.breaker.tripped)
	nodes, err := ctl.Quarantined(context.Background())
	require.NoError(t, err)
	require.Len(t, nodes, 1, "the standby's view is untouched")
	assert.False(t, nodes[0].ReleasePending)
	for _, step := range []string{stepRelease, stepBreaker, stepAcknowledge} {
		skipped := h.auditFor(step, audit.DecisionSkipped)
		if assert.Len(t, skipped, 1, step) {
			assert.Equal(t, "alice", skipped[0].Operator, step)
			assert.Contains(t, skipped[0].Reason, "otelcol-gpu-gateway-0 owns gpu_faults", step)
		}
		assert.Empty(t, h.auditFor(step, audit.DecisionActed), step)
	}
	assert.Equal(t, int64(1), decisionCount(t, h, actionRelease, outcomeSkipped))
	assert.Equal(t, int64(1), decisionCount(t, h, actionBreakerReset, outcomeSkipped))
	assert.Equal(t, 3, h.logs.FilterMessage("remediation: console control refused on a replica that does not act").Len())

	el.set(ownership.RoleElecting, ownership.Member{})
	_, err = ctl.Release(context.Background(), "xl003", operator)
	assert.EqualError(t, err, "otelcol-gpu-gateway-1 does not act: the election of the owner of gpu_faults is in progress; try again in a few seconds")

	el.owner()
	require.NoError(t, ctl.ResetBreaker(context.Background(), operator))
	_, err = ctl.Release(context.Background(), "xl003", operator)
	require.NoError(t, err)
	require.NoError(t, ctl.Acknowledge(context.Background(), r.ID, operator))
	_, rel = h.platform.counts()
	assert.Equal(t, 1, rel)
	assert.Equal(t, 1, h.platform.breaker.resets)
}

// A verification window that ends after this replica became a standby
// releases nothing: the node stays quarantined for the owner to decide.
func TestStandbyWindowReleasesNothing(t *testing.T) {
	el := &fakeElection{}
	el.owner()
	h := newHarness(t, withElection(t, el))
	r := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl008", fault.StateOpen)
	require.NoError(t, h.consume(r))
	require.NoError(t, h.consume(withState(r, fault.StateResolved)))
	require.Equal(t, 1, h.clock.pending(), "the verification window runs")
	el.standby()
	h.clock.Advance(time.Hour)
	_, rel := h.platform.counts()
	assert.Zero(t, rel)
	skipped := h.auditFor(stepRelease, audit.DecisionSkipped)
	require.Len(t, skipped, 1)
	assert.Contains(t, skipped[0].Reason, "not the replica that acts: the node stays quarantined")
}

// With the decision log, a record in hand on a replica that lost the
// partitions is decided by nobody: nothing acted, nothing published, so
// the next owner decides it.
func TestStandbyPublishesNoDecision(t *testing.T) {
	cluster := newDecisionCluster(t)
	el := &fakeElection{}
	el.standby()
	h := newHarness(t, withElection(t, el), withDecisionLog(t, cluster, "gateway-1"))
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(r))
	q, _ := h.platform.counts()
	assert.Zero(t, q)
	assert.Empty(t, readDecisions(t, cluster), "no decision published")
	skipped := h.auditFor(stepRecord, audit.DecisionSkipped)
	require.Len(t, skipped, 1)
	assert.Contains(t, skipped[0].Reason, "not the replica that acts")

	next := newHarness(t, withDecisionLog(t, cluster, "gateway-0"))
	require.NoError(t, next.consume(r))
	q, _ = next.platform.counts()
	assert.Equal(t, 1, q, "the owner decides it")
}

// Which replica acts, chosen at Start: nothing elects (alone), the
// receiver's election, or a failure naming the ambiguity. The exporter
// finds the election extension among the host's, as the collector runs it.
func TestElectAtStart(t *testing.T) {
	h := newHarness(t, withConsole)
	role := h.console.ctl(t).Role()
	assert.Equal(t, console.ElectionNone, role.Election)
	assert.Equal(t, ownership.RoleOwner, role.Role)

	start := func(host component.Host) (*remediationExporter, error) {
		cfg := createDefaultConfig().(*Config)
		exp, err := newRemediationExporter(cfg, componenttest.NewNopTelemetrySettings(), dependencies{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
		return exp, exp.Start(context.Background(), host)
	}
	_, err := start(extHost{electionID: newElectionExt(t), component.MustNewIDWithName("election", "b"): newElectionExt(t)})
	assert.EqualError(t, err, "remediationexporter: which replica acts: 2 election extensions in service::extensions (election, election/b): one gpu_faults consumer group elects the replica that acts; keep one")

	// Found by its type: electing (nothing acts) until the receiver offers,
	// then its status; the extension names the exporter as its follower.
	ext := newElectionExt(t)
	exp, err := start(extHost{electionID: ext})
	require.NoError(t, err)
	assert.Equal(t, console.ElectionGPUFaults, exp.role().Election)
	assert.Equal(t, ownership.RoleElecting, exp.role().Role, "before the receiver starts")
	assert.False(t, exp.leader.IsLeader())
	ready := ext.(interface{ Ready() error })
	assert.ErrorContains(t, ready.Ready(), "remediation act only on the replica the gpu_faults receiver elects")
	el := &fakeElection{}
	el.owner()
	withdraw, err := ext.(ownership.Seam).Offer(component.MustNewID("gpu_faults"), el)
	require.NoError(t, err)
	defer withdraw()
	require.NoError(t, ready.Ready())
	assert.True(t, exp.leader.IsLeader())
	assert.Equal(t, gw1, exp.role().Owner)

	// A configured Leader (the Lease) is kept.
	lease := &flagLeader{leader: false}
	h = newHarness(t, withConsole, withElection(t, &fakeElection{}), func(_ *Config, d *dependencies) { d.leader = lease })
	role = h.console.ctl(t).Role()
	assert.Equal(t, console.ElectionLease, role.Election)
	assert.Equal(t, ownership.RoleStandby, role.Role)
}

// A control a standby forwarded is audited on the owner with the operator,
// the standby it came through and the caller's address as the standby saw
// it.
func TestForwardedControlAudited(t *testing.T) {
	el := &fakeElection{}
	el.owner()
	h := newHarness(t, withConsole, withElection(t, el))
	ctl := h.console.ctl(t)
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)))
	h.platform.breaker.tripped = true
	via := console.Operator{Name: "alice", Remote: "10.0.0.9:40000", Reason: "RMA done", Via: gw0.Name, ForwardedFor: "10.0.0.7:51234"}
	_, err := ctl.Release(context.Background(), "xl003", via)
	require.NoError(t, err)
	require.NoError(t, ctl.ResetBreaker(context.Background(), via))
	for _, step := range []string{stepRelease, stepBreaker} {
		acted := h.auditFor(step, audit.DecisionActed)
		require.Len(t, acted, 1, step)
		assert.Equal(t, "alice", acted[0].Operator, step)
		assert.Equal(t, "otelcol-gpu-gateway-0", acted[0].OperatorVia, step)
		assert.Equal(t, "10.0.0.7:51234", acted[0].OperatorForwardedFor, step)
		assert.Equal(t, "10.0.0.9:40000", acted[0].OperatorRemote, step)
	}
	raw, err := os.ReadFile(h.auditLog)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"operator.via":"otelcol-gpu-gateway-0","operator.forwarded_for":"10.0.0.7:51234"`)
}
