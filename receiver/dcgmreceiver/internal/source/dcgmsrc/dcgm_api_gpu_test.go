//go:build gpu && cgo

package dcgmsrc

// These tests run against a real DCGM and are the only ones that need a
// GPU: `go test -tags gpu`. By default they start DCGM embedded (needs
// libdcgm.so.4); set DCGM_TEST_ENDPOINT (host:port or a socket path) to use
// a running nv-hostengine instead.

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func realConfig() Config {
	if ep := os.Getenv("DCGM_TEST_ENDPOINT"); ep != "" {
		return Config{Mode: ModeStandalone, Endpoint: ep, CallTimeout: 30 * time.Second}
	}
	return Config{Mode: ModeEmbedded, CallTimeout: 30 * time.Second}
}

func TestRealDCGMCollect(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zapcore.InfoLevel)
	s := New(NewConnections(), realConfig(), zap.New(core))
	xids := make(chan model.XIDEvent, 100)
	require.NoError(t, s.Start(ctx, func(e model.XIDEvent) {
		select {
		case xids <- e:
		default:
		}
	}))
	defer func() { require.NoError(t, s.Shutdown(ctx)) }()

	var snap model.Snapshot
	for range 3 { // the first reads may precede DCGM's first sample
		var err error
		snap, err = s.Collect(ctx, allFields())
		require.NoError(t, err)
		time.Sleep(time.Second)
	}
	require.NotEmpty(t, snap.GPUs, "DCGM lists no GPU")
	var parent model.GPU
	for _, gpu := range snap.GPUs {
		if gpu.GPU.MIG != nil {
			// A MIG instance follows its GPU and carries its identity.
			t.Logf("  MIG GI %d CI %d %q: %d values", gpu.GPU.MIG.GPUInstanceID, gpu.GPU.MIG.ComputeInstanceID, gpu.GPU.MIG.Profile, len(gpu.Values))
			id := gpu.GPU
			id.MIG = nil
			assert.Equal(t, parent, id)
			assert.False(t, gpu.Unresponsive)
			continue
		}
		parent = gpu.GPU
		t.Logf("GPU %d %s %s %s driver %s: %d values", gpu.GPU.Index, gpu.GPU.UUID, gpu.GPU.Model, gpu.GPU.PCIBusID, gpu.GPU.DriverVersion, len(gpu.Values))
		assert.False(t, gpu.Unresponsive)
		assert.Regexp(t, `^GPU-`, gpu.GPU.UUID)
		assert.NotEmpty(t, gpu.GPU.Model)
		assert.NotEmpty(t, gpu.GPU.DriverVersion)
		got := valuesByField(gpu)
		for _, id := range []model.FieldID{model.FieldGPUTemp, model.FieldFBTotal, model.FieldFBUsed, model.FieldPowerUsage, model.FieldSMClock} {
			assert.Contains(t, got, id)
		}
		for _, v := range gpu.Values {
			assert.False(t, model.IsBlankInt64(v.Int), "field %d", v.Field)
			assert.False(t, model.IsBlankFloat64(v.Float), "field %d", v.Field)
			f, _ := model.FieldByID(v.Field)
			t.Logf("  %-48s int=%d float=%g", f.Name, v.Int, v.Float)
		}
	}
	assert.Empty(t, s.pollXIDs(ctx), "no XID since Start on a healthy GPU")
	gen, up := s.conn.Load().generation()
	assert.True(t, up)
	assert.Equal(t, uint64(1), gen)
	for _, e := range logs.All() {
		t.Logf("log: %s %v", e.Message, e.ContextMap())
	}
	assert.Zero(t, logs.FilterMessageSnippet("Lost the connection").Len())
}

func TestRealDCGMAPI(t *testing.T) {
	a := newDCGMAPI()
	cfg := realConfig()
	address, socket := parseEndpoint(cfg.Endpoint)
	cleanup, err := a.Init(cfg.Mode, address, socket)
	require.NoError(t, err)
	defer cleanup()
	ids, err := a.SupportedDevices()
	require.NoError(t, err)
	require.NotEmpty(t, ids)
	info, err := a.DeviceInfo(ids[0])
	require.NoError(t, err)
	assert.Regexp(t, `^GPU-`, info.UUID)
	groups, err := a.SupportedMetricGroups(ids[0])
	if err != nil {
		code, ok := statusOf(err)
		assert.True(t, ok && code == stProfilingNotSupported, "unexpected error %v", err)
	}
	t.Logf("%s: %d profiling metric groups", info.Model, len(groups))

	fg, err := a.CreateFieldGroup("otelcolgpu_gpu_test", []model.FieldID{model.FieldGPUTemp, model.FieldXIDErrors})
	require.NoError(t, err)
	defer func() { assert.NoError(t, a.DestroyFieldGroup(fg)) }()
	g, err := a.CreateGPUGroup("otelcolgpu_gpu_test", ids)
	require.NoError(t, err)
	defer func() { assert.NoError(t, a.DestroyGPUGroup(g)) }()
	require.NoError(t, a.Watch(fg, g, time.Second, time.Hour, 0))
	values, err := a.LatestValues(ids[0], []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err)
	require.Len(t, values, 1)
	temp, ok := values[0].toModel()
	require.True(t, ok, "GPU temperature: %+v", values[0])
	assert.Positive(t, temp.Int)
	_, _, err = a.ValuesSince(g, fg, time.Now().Add(-time.Minute))
	require.NoError(t, err)
	require.NoError(t, a.Unwatch(fg, g))

	// MIG: the hierarchy answers (empty without MIG); GPU instances, if
	// any, can be grouped, watched and read.
	instances, err := a.MIGHierarchy()
	require.NoError(t, err)
	t.Logf("%d MIG GPU instances", len(instances))
	entities := make([]uint, len(instances))
	for i, gi := range instances {
		t.Logf("  GPU %d: entity %d, GI %d, CIs %v, profile %q", gi.GPU, gi.Entity, gi.InstanceID, gi.ComputeInstanceIDs, gi.Profile)
		assert.Contains(t, ids, gi.GPU)
		entities[i] = gi.Entity
	}
	if len(instances) == 0 {
		return
	}
	fb := []model.FieldID{model.FieldFBTotal, model.FieldFBUsed}
	migFG, err := a.CreateFieldGroup("otelcolgpu_gpu_test_mig", fb)
	require.NoError(t, err)
	defer func() { assert.NoError(t, a.DestroyFieldGroup(migFG)) }()
	mg, err := a.CreateGPUInstanceGroup("otelcolgpu_gpu_test_mig", entities)
	require.NoError(t, err)
	defer func() { assert.NoError(t, a.DestroyGPUGroup(mg)) }()
	require.NoError(t, a.Watch(migFG, mg, time.Second, 0, 1))
	defer func() { assert.NoError(t, a.Unwatch(migFG, mg)) }()
	var migValues []fieldValue
	require.Eventually(t, func() bool { // the first sample comes with DCGM's next update
		migValues, err = a.GPUInstanceValues(entities, fb)
		require.NoError(t, err)
		_, ok := migValues[0].toModel()
		return ok
	}, 10*time.Second, 200*time.Millisecond)
	require.Len(t, migValues, len(entities)*len(fb))
	for _, v := range migValues {
		assert.Contains(t, entities, v.GPU)
		mv, ok := v.toModel()
		t.Logf("  entity %d field %d: %+v (ok %v)", v.GPU, v.Field, mv, ok)
	}
}
