package console

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
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
