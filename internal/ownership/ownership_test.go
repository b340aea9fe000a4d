package ownership

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type fixed Status

func (f fixed) Status() Status { return Status(f) }

// seam is a Seam holding one election, as a component.
type seam struct {
	component.StartFunc
	component.ShutdownFunc
	e Election
}

func (s *seam) Offer(component.ID, Election) (func(), error) { return func() {}, nil }
func (s *seam) Follow(component.ID) Election                 { return s.e }

// notSeam is an extension of the election type that is not one.
type notSeam struct {
	component.StartFunc
	component.ShutdownFunc
}

type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }

var (
	electionID = component.MustNewID(ExtensionType)
	otherID    = component.MustNewIDWithName(ExtensionType, "other")
)

// The one election extension is found by its type, whatever its name;
// none is no election (one replica acts alone); several, or one that is
// not a Seam, is an error naming them.
func TestFromHost(t *testing.T) {
	id, s, err := FromHost(host{component.MustNewID("faultconsole"): &notSeam{}})
	require.NoError(t, err)
	assert.Nil(t, s, "no election extension")
	assert.Equal(t, component.ID{}, id)

	a := &seam{e: fixed{Role: RoleOwner, Self: Member{Name: "gw-0"}}}
	id, s, err = FromHost(host{otherID: a, component.MustNewID("faultconsole"): &notSeam{}})
	require.NoError(t, err)
	assert.Equal(t, otherID, id)
	assert.Equal(t, RoleOwner, s.Follow(component.MustNewID("remediation")).Status().Role)

	_, s, err = FromHost(host{electionID: a, otherID: &seam{}})
	assert.Nil(t, s)
	assert.EqualError(t, err, "2 election extensions in service::extensions (election, election/other): one gpu_faults consumer group elects the replica that acts; keep one")

	_, s, err = FromHost(host{electionID: &notSeam{}})
	assert.Nil(t, s)
	assert.ErrorContains(t, err, `extension "election" (*ownership.notSeam) is not the election extension`)
	require.NoError(t, a.Shutdown(context.Background()))
}

func TestMemberString(t *testing.T) {
	assert.Equal(t, "gw-1", Member{Name: "gw-1"}.String())
	assert.Equal(t, "gw-1 (https://gw-1.gw:8787)", Member{Name: "gw-1", Console: "https://gw-1.gw:8787"}.String())
}
