package ownership

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type fixed Status

func (f fixed) Status() Status { return Status(f) }

func TestRegisterFind(t *testing.T) {
	id, e, err := Find()
	require.NoError(t, err)
	assert.Nil(t, e, "nothing registered")
	assert.Empty(t, id)

	a := fixed{Role: RoleOwner, Self: Member{Name: "gw-0"}}
	unA := Register("gpu_faults", a)
	id, e, err = Find()
	require.NoError(t, err)
	assert.Equal(t, "gpu_faults", id)
	assert.Equal(t, RoleOwner, e.Status().Role)

	b := fixed{Role: RoleStandby}
	unB := Register("gpu_faults/other", b)
	_, e, err = Find()
	assert.Nil(t, e)
	assert.EqualError(t, err, "2 gpu_faults receivers in this collector (gpu_faults, gpu_faults/other): one consumer group must elect the replica that acts")
	unB()

	// A replacement under the same id survives the withdrawal of the one
	// it replaced.
	c := fixed{Role: RoleStandby, Self: Member{Name: "gw-0"}}
	unC := Register("gpu_faults", c)
	unA()
	_, e, err = Find()
	require.NoError(t, err)
	assert.Equal(t, RoleStandby, e.Status().Role)
	unC()
	_, e, _ = Find()
	assert.Nil(t, e)
}

func TestMemberString(t *testing.T) {
	assert.Equal(t, "gw-1", Member{Name: "gw-1"}.String())
	assert.Equal(t, "gw-1 (https://gw-1.gw:8787)", Member{Name: "gw-1", Console: "https://gw-1.gw:8787"}.String())
}
