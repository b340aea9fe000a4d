package attribution

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestDeviceRefMatches(t *testing.T) {
	whole := testGPUs[0]
	mig1, mig2 := testGPUs[4], testGPUs[5]
	assert.True(t, uuidRef(whole.UUID, wholeGPU).matches(whole))
	assert.False(t, uuidRef(whole.UUID, 1).matches(whole), "an instance reference never names a whole GPU")
	assert.True(t, uuidRef(mig1.UUID, wholeGPU).matches(mig1), "a whole-GPU reference names its instances")
	assert.True(t, indexRef(4, 2).matches(mig2))
	assert.False(t, indexRef(4, 2).matches(mig1))
	assert.True(t, deviceNameRef("nvidia4", 1).matches(mig1))
	assert.False(t, deviceNameRef("", wholeGPU).matches(model.GPU{}), "an empty name matches nothing")
	assert.False(t, uuidRef("", wholeGPU).matches(model.GPU{}))
	assert.False(t, deviceRef{}.matches(whole))
}

func TestDeviceMapFirstClaimWins(t *testing.T) {
	m := deviceMap[string]{}
	assert.True(t, m.add(uuidRef(testGPUs[0].UUID, wholeGPU), "first", testGPUs))
	assert.False(t, m.add(indexRef(0, wholeGPU), "second", testGPUs), "same GPU by another name")
	v, ok := m.lookup(testGPUs[0])
	assert.True(t, ok)
	assert.Equal(t, "first", v)
}

func TestDeviceMapLookupOrder(t *testing.T) {
	m := deviceMap[string]{}
	// Nothing in the GPU list: the references are stored as they are.
	m.add(indexRef(4, wholeGPU), "whole GPU 4", nil)
	m.add(indexRef(4, 2), "instance 2 of GPU 4", nil)
	m.add(uuidRef("GPU-x", wholeGPU), "by uuid", nil)
	m.add(indexRef(7, wholeGPU), "by index", nil)

	for _, tt := range []struct {
		gpu  model.GPU
		want string
	}{
		{model.GPU{Index: 4, MIG: &model.MIGInstance{GPUInstanceID: 2}}, "instance 2 of GPU 4"},
		{model.GPU{Index: 4, MIG: &model.MIGInstance{GPUInstanceID: 5}}, "whole GPU 4"},
		{model.GPU{Index: 4}, "whole GPU 4"},
		{model.GPU{Index: 7, UUID: "GPU-x"}, "by uuid"},
		{model.GPU{Index: 7, UUID: "GPU-y"}, "by index"},
		{model.GPU{Index: 8}, ""},
	} {
		v, _ := m.lookup(tt.gpu)
		assert.Equal(t, tt.want, v, "%+v", tt.gpu)
	}
	var empty deviceMap[string]
	_, ok := empty.lookup(testGPUs[0])
	assert.False(t, ok)
}

func BenchmarkOwner(b *testing.B) {
	m := deviceMap[podOwner]{}
	for i, gpu := range testGPUs {
		m.add(uuidRef(gpu.UUID, wholeGPU), podOwner{name: "p", namespace: "ns", container: string(rune('a' + i))}, testGPUs)
	}
	a := &Attributor{}
	a.table.Store(&ownerTable{pods: m, hpcJobs: deviceMap[string]{indexRef(1, wholeGPU): "42"}})
	b.ReportAllocs()
	for b.Loop() {
		for _, gpu := range testGPUs {
			_ = a.Owner(gpu)
		}
	}
}
