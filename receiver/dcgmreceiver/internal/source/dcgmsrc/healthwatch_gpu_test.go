//go:build gpu && cgo

package dcgmsrc

// DCGM's health watches on a real device (`go test -tags gpu`, see
// dcgm_api_gpu_test.go): the watches are set (the NVSwitch ones where the
// node has NVSwitches and DCGM takes them), checks succeed, and a healthy
// GPU reports no failure. Only an unhealthy GPU would report incidents;
// each one is logged so that a run on such a node shows what DCGM said.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestRealDCGMHealthWatches(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zapcore.InfoLevel)
	s := New(NewConnections(), realConfig(), zap.New(core))
	require.NoError(t, s.Start(ctx, nil))
	defer func() { require.NoError(t, s.Shutdown(ctx)) }()

	var rep model.HealthReport
	for range 3 { // the first check after setting the watches reports nothing
		var err error
		rep, err = s.CheckHealth(ctx)
		require.NoError(t, err)
		time.Sleep(time.Second)
	}
	require.NotEmpty(t, rep.GPUs, "DCGM lists no GPU")
	assert.Equal(t, allGPUSystems, rep.GPUSystems, "every GPU system is watched")
	t.Logf("%d GPUs, %d NVSwitches watched (%v)", len(rep.GPUs), len(rep.NVSwitches), rep.NVSwitchSystems)
	for _, g := range rep.GPUs {
		assert.Regexp(t, `^GPU-`, g.UUID)
	}
	for _, in := range rep.Incidents {
		t.Logf("incident: GPU %d nvswitch=%v/%d %s %s %s (%d): %s", in.GPU.Index, in.OnNVSwitch, in.NVSwitch, in.System, in.Result, in.CodeName, in.Code, in.Message)
		assert.NotEqual(t, model.HealthFail, in.Result, "a healthy test GPU fails no health watch")
		assert.NotEmpty(t, in.CodeName)
	}
	for _, e := range logs.All() {
		t.Logf("log: %s %v", e.Message, e.ContextMap())
	}
}
