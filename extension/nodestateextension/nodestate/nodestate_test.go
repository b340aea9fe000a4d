package nodestate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

type hostWithExtensions struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h hostWithExtensions) GetExtensions() map[component.ID]component.Component { return h.exts }

type storeExtension struct {
	component.StartFunc
	component.ShutdownFunc
	*MemoryStore
}

func TestFromHost(t *testing.T) {
	id := component.MustNewID("nodestate")
	store := NewMemoryStore(DefaultLimits())
	host := hostWithExtensions{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{
		id: storeExtension{MemoryStore: store},
		component.MustNewIDWithName("nodestate", "wrong"): struct {
			component.StartFunc
			component.ShutdownFunc
		}{},
	}}

	got, err := FromHost(host, id)
	require.NoError(t, err)
	assert.Same(t, store, got.(storeExtension).MemoryStore)

	_, err = FromHost(componenttest.NewNopHost(), id)
	require.EqualError(t, err, `extension "nodestate" is not configured: add it under extensions and service::extensions`)

	_, err = FromHost(host, component.MustNewIDWithName("nodestate", "wrong"))
	require.ErrorContains(t, err, `extension "nodestate/wrong"`)
	require.ErrorContains(t, err, "is not a nodestate extension")
}

func TestCounterNames(t *testing.T) {
	assert.Equal(t, "nvlink.crc_flit", NVLinkCRCFlitErrors.String())
	assert.Equal(t, "ecc.dbe_aggregate", ECCDBEAggregate.String())
	assert.Equal(t, "GPUCounter(8)", NumGPUCounters.String())
	assert.Equal(t, "GPUCounter(-1)", GPUCounter(-1).String())
	assert.Equal(t, "symbol_error", IBSymbolErrors.String())
	assert.Equal(t, "port_rcv_errors", IBPortRcvErrors.String())
	assert.Equal(t, "IBCounter(4)", NumIBCounters.String())
}

func TestNVLinkCRCErrors(t *testing.T) {
	var h GPUHealth
	h.Counters[NVLinkCRCFlitErrors].Delta = 3
	h.Counters[NVLinkCRCDataErrors].Delta = 4
	h.Counters[NVLinkReplayErrors].Delta = 100
	assert.Equal(t, uint64(7), h.NVLinkCRCErrors())
}
