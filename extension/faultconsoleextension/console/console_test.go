package console

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type host struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

type fakeConsole struct{ component.Component }

func (fakeConsole) RecordFault(Fault) {}
func (fakeConsole) RecordStep(Step)   {}
func (fakeConsole) Attach(Controller) {}
func (fakeConsole) Detach(Controller) {}

func TestFromHost(t *testing.T) {
	id := component.MustNewID("faultconsole")
	other := component.MustNewIDWithName("faultconsole", "other")
	h := host{componenttest.NewNopHost(), map[component.ID]component.Component{id: fakeConsole{}, other: struct{ component.Component }{}}}
	c, err := FromHost(h, id)
	require.NoError(t, err)
	assert.NotNil(t, c)
	_, err = FromHost(h, component.MustNewIDWithName("faultconsole", "missing"))
	assert.ErrorContains(t, err, `extension "faultconsole/missing" is not configured`)
	_, err = FromHost(h, other)
	assert.ErrorContains(t, err, `is not a faultconsole extension`)
}

func TestNotOwnerError(t *testing.T) {
	member := func(name, url string) ownership.Member { return ownership.Member{Name: name, Console: url} }
	for _, tc := range []struct {
		role Role
		want string
	}{
		{Role{ElectionGPUFaults, ownership.Status{Role: ownership.RoleStandby, Self: member("gw-1", ""), Owner: member("gw-0", "https://gw-0:8787")}},
			"gw-1 is a standby and never acts: gw-0 owns gpu_faults and acts; send controls to its console https://gw-0:8787"},
		{Role{ElectionGPUFaults, ownership.Status{Role: ownership.RoleStandby, Self: member("gw-1", ""), Owner: member("gw-0", "")}},
			"gw-1 is a standby and never acts: gw-0 owns gpu_faults and acts; send controls to its console"},
		{Role{ElectionLease, ownership.Status{Role: ownership.RoleStandby}},
			"this replica is a standby and never acts: another replica owns the remediation Lease (not named to this one); send controls to the owner's console"},
		{Role{ElectionGPUFaults, ownership.Status{Role: ownership.RoleElecting, Self: member("gw-1", "")}},
			"gw-1 does not act: the election of the owner of gpu_faults is in progress; try again in a few seconds"},
	} {
		assert.EqualError(t, &NotOwnerError{Role: tc.role}, tc.want)
	}
}
