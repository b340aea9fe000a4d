package electionextension

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/extension/electionextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// status is an election whose status the test sets.
type status struct {
	mu sync.Mutex
	st ownership.Status
}

func (s *status) Status() ownership.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *status) set(st ownership.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st = st
}

var (
	receiverID = component.MustNewID("gpu_faults")
	exporterID = component.MustNewID("remediation")
)

func newElection(t *testing.T) (*election, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	set := extensiontest.NewNopSettings(metadata.Type)
	set.ID, set.Logger = component.NewID(metadata.Type), zap.New(core)
	ext, err := NewFactory().Create(context.Background(), set, createDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return ext.(*election), logs
}

// host is a collector's host holding extensions.
type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }

// What the receiver offers is what the exporter follows, found through the
// host as the components find it; electing before the offer and after the
// withdrawal; the follower sees every change of the receiver's status.
func TestOfferFollow(t *testing.T) {
	x, logs := newElection(t)
	id, seam, err := ownership.FromHost(host{component.NewID(metadata.Type): x})
	require.NoError(t, err)
	assert.Equal(t, component.NewID(metadata.Type), id)

	follow := seam.Follow(exporterID)
	assert.Equal(t, ownership.Status{Role: ownership.RoleElecting}, follow.Status(), "nobody offered yet")

	gw0 := ownership.Member{Name: "gw-0", Console: "https://gw-0.gw:8787"}
	rcv := &status{}
	rcv.set(ownership.Status{Role: ownership.RoleStandby, Self: ownership.Member{Name: "gw-1"}, Owner: gw0})
	withdraw, err := seam.Offer(receiverID, rcv)
	require.NoError(t, err)
	assert.Equal(t, ownership.RoleStandby, follow.Status().Role)
	assert.Equal(t, gw0, follow.Status().Owner)
	rcv.set(ownership.Status{Role: ownership.RoleOwner, Self: gw0, Owner: gw0})
	assert.Equal(t, ownership.RoleOwner, follow.Status().Role, "the follower reads the receiver's status when asked")

	require.NoError(t, x.Ready())
	assert.Equal(t, 1, logs.FilterMessage("election: the gpu_faults receiver's consumer group elects the one replica that acts").Len())

	withdraw()
	assert.Equal(t, ownership.RoleElecting, follow.Status().Role, "a withdrawn election elects nobody")
	withdraw() // twice is harmless
	assert.NoError(t, x.NotReady())
}

// One consumer group elects: a second receiver cannot offer while the
// first's is bound, and can once it is withdrawn; an old withdraw does not
// remove its successor.
func TestSecondReceiverRefused(t *testing.T) {
	x, _ := newElection(t)
	a, b := &status{}, &status{}
	a.set(ownership.Status{Role: ownership.RoleOwner})
	b.set(ownership.Status{Role: ownership.RoleStandby})
	withdrawA, err := x.Offer(receiverID, a)
	require.NoError(t, err)
	_, err = x.Offer(component.MustNewIDWithName("gpu_faults", "b"), b)
	assert.EqualError(t, err, `extension "election" already carries the election of receiver "gpu_faults"; "gpu_faults/b" cannot offer another: one gpu_faults consumer group elects the replica that acts (run one gpu_faults receiver)`)
	withdrawA()
	withdrawB, err := x.Offer(component.MustNewIDWithName("gpu_faults", "b"), b)
	require.NoError(t, err)
	withdrawA()
	assert.Equal(t, ownership.RoleStandby, x.Follow(exporterID).Status().Role, "the first withdraw does not take the second's")
	withdrawB()
}

// A follower without a receiver would never act: the collector fails at
// Ready naming the follower and the fix. No follower and no receiver (a
// configuration without remediation) is fine.
func TestReadyWithoutReceiver(t *testing.T) {
	x, _ := newElection(t)
	require.NoError(t, x.Ready(), "nobody follows, nobody offers")
	x.Follow(exporterID)
	x.Follow(component.MustNewIDWithName("remediation", "b"))
	assert.EqualError(t, x.Ready(), `extension "election": remediation, remediation/b act only on the replica the gpu_faults receiver elects, and no gpu_faults receiver runs in this collector's pipelines: they would never act; add the gpu_faults receiver to a pipeline, or remove "election" from service::extensions (one replica then acts alone)`)
}

// Two collectors in one process each hold their own election.
func TestTwoCollectorsApart(t *testing.T) {
	x1, _ := newElection(t)
	x2, _ := newElection(t)
	a := &status{}
	a.set(ownership.Status{Role: ownership.RoleOwner})
	withdraw, err := x1.Offer(receiverID, a)
	require.NoError(t, err)
	defer withdraw()
	assert.Equal(t, ownership.RoleOwner, x1.Follow(exporterID).Status().Role)
	assert.Equal(t, ownership.RoleElecting, x2.Follow(exporterID).Status().Role, "the other collector's election is not this one's")
	_, err = x2.Offer(receiverID, &status{})
	require.NoError(t, err, "the same receiver id in another collector")
}

func TestFactoryRefusesOtherConfig(t *testing.T) {
	_, err := createExtension(context.Background(), extension.Settings{}, &struct{}{})
	assert.ErrorIs(t, err, errConfigNotElection)
}
