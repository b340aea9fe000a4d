package dcgmreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// stuckRelease is a source whose Shutdown is stuck in the driver (deaf to
// its context, like a cgo call) until release is closed.
type stuckRelease struct {
	*fakeSource
	release chan struct{}
}

func (s *stuckRelease) Shutdown(context.Context) error {
	<-s.release
	return nil
}

// The collector shuts down with a context that has no deadline: a stuck
// collection and a stuck release of the source still end Shutdown, after
// a call_timeout each, with an error that says why (issue 19: SIGTERM
// whatever the state of the GPU library).
func TestShutdownWithoutDeadlineEndsDespiteStuckDriver(t *testing.T) {
	src := &stuckRelease{
		fakeSource: &fakeSource{block: make(chan struct{}), snaps: []model.Snapshot{snapshot(time.Unix(1_790_000_000, 0))}},
		release:    make(chan struct{}),
	}
	cfg := fastConfig()
	cfg.CallTimeout = 20 * time.Millisecond
	env := newTestEnv(t, cfg, src.fakeSource)
	env.r.deps.metricsSource = src
	require.NoError(t, env.r.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.starts > 0 }, 10*time.Second, 5*time.Millisecond)

	err := env.r.Shutdown(context.Background())
	require.Error(t, err)
	assert.ErrorContains(t, err, "a collection is still running")
	assert.ErrorContains(t, err, "releasing the GPU source did not finish within call_timeout (20ms)")

	// The stuck calls finally return; nothing is left running (goleak).
	close(src.block)
	close(src.release)
	env.r.wg.Wait()
}
