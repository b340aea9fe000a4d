package stragglerprocessor

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
)

// recordingConsole is a console.Console that keeps what it is given.
type recordingConsole struct {
	component.StartFunc
	component.ShutdownFunc
	mu    sync.Mutex
	steps []console.Step
}

func (c *recordingConsole) RecordFault(console.Fault) {}
func (c *recordingConsole) RecordStep(s console.Step) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, s)
}
func (c *recordingConsole) Attach(console.Controller) {}
func (c *recordingConsole) Detach(console.Controller) {}

func (c *recordingConsole) recorded() []console.Step {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]console.Step(nil), c.steps...)
}

// plainExtension is an extension that is not a console.
type plainExtension struct {
	component.StartFunc
	component.ShutdownFunc
}

// extHost is a host with extensions.
type extHost struct {
	ext map[component.ID]component.Component
}

func (h extHost) GetExtensions() map[component.ID]component.Component { return h.ext }

var consoleID = component.MustNewID("faultconsole")

// startWithConsole starts h's processor with a recording console.
func startWithConsole(t testing.TB, h *harness) *recordingConsole {
	rc := &recordingConsole{}
	h.p.cfg.Console = consoleID.String()
	require.NoError(t, h.p.Start(context.Background(), extHost{ext: map[component.ID]component.Component{consoleID: rc}}))
	t.Cleanup(func() { require.NoError(t, h.p.Shutdown(context.Background())) })
	return rc
}

func TestConsoleGetsEveryRankOfEveryDecidedStep(t *testing.T) {
	h := newHarness(t, defaultConfig())
	rc := startWithConsole(t, h)
	const job, attempt = "llama-70b", int64(2)
	stepDur := 2500 * time.Millisecond
	for step := int64(1); step <= 4; step++ {
		start := t0.Add(time.Duration(step) * 3 * time.Second)
		for r := int64(0); r < 8; r++ {
			c := healthyCompute(r)
			if r == 5 {
				c = 2300 * time.Millisecond
			}
			h.send(t, rank{job: job, attempt: attempt, step: step, rank: r, worldSize: 8, ppStage: 0,
				start: start.Add(time.Duration(r) * time.Millisecond), duration: stepDur, compute: c, wait: stepDur - c})
		}
		assert.Len(t, rc.recorded(), int(step)*8, "step %d: recorded when decided, one per rank", step)
	}
	type key struct{ step, rank int64 }
	got := map[key]console.Step{}
	for _, s := range rc.recorded() {
		k := key{s.Step, s.Rank}
		require.NotContains(t, got, k, "step %d rank %d recorded twice", s.Step, s.Rank)
		got[k] = s
	}
	require.Len(t, got, 32)
	for step := int64(1); step <= 4; step++ {
		for r := int64(0); r < 8; r++ {
			s := got[key{step, r}]
			assert.Equal(t, job, s.Job)
			assert.Equal(t, attempt, s.Attempt)
			assert.Equal(t, "xl00"+strconv.FormatInt(r/8, 10), s.Node)
			assert.Equal(t, stepDur, s.Duration)
			if r != 5 {
				assert.Equal(t, healthyCompute(r), s.Compute)
				assert.Empty(t, s.Verdict, "step %d rank %d", step, r)
				assert.Less(t, s.Score, 3.5, "step %d rank %d", step, r)
				continue
			}
			assert.Equal(t, 2300*time.Millisecond, s.Compute)
			want := "flagged"
			if step >= 3 {
				want = "straggler.compute" // as the verdict spans say
			}
			assert.Equal(t, want, s.Verdict, "rank 5 at step %d", step)
			assert.Greater(t, s.Score, 3.5, "step %d", step)
		}
	}
	// The console and the verdict spans agree.
	v := h.verdicts(t)
	for k, s := range got {
		want := verdict(v, k.step, k.rank)
		if want == "none" {
			want = ""
		}
		assert.Equal(t, want, s.Verdict, "step %d rank %d", k.step, k.rank)
	}
}

func TestConsoleGetsStepsDecidedByTimeoutAndShutdown(t *testing.T) {
	h := newHarness(t, defaultConfig())
	rc := startWithConsole(t, h)
	for r := int64(0); r < 3; r++ { // world size 8: decided only by the wait
		h.send(t, rank{job: "j", step: 7, rank: r, worldSize: 8, ppStage: -1, start: t0, duration: time.Second, compute: healthyCompute(r)})
	}
	assert.Empty(t, rc.recorded(), "undecided")
	h.clock.advance(time.Hour)
	h.p.flush(context.Background(), false)
	require.Len(t, rc.recorded(), 3)
	for _, s := range rc.recorded() {
		assert.Equal(t, int64(7), s.Step)
	}
}

func TestConsoleMissingFailsStart(t *testing.T) {
	h := newHarness(t, defaultConfig())
	h.p.cfg.Console = "faultconsole/other"
	err := h.p.Start(context.Background(), extHost{ext: map[component.ID]component.Component{consoleID: &recordingConsole{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"faultconsole/other" is not configured`)
	assert.Contains(t, err.Error(), "stragglerprocessor")

	// An extension of another kind is refused too.
	h.p.cfg.Console = "faultconsole"
	err = h.p.Start(context.Background(), extHost{ext: map[component.ID]component.Component{consoleID: plainExtension{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a faultconsole extension")
}

func TestConsoleNotConfiguredRecordsNothing(t *testing.T) {
	h := newHarness(t, defaultConfig())
	require.NoError(t, h.p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, h.p.Shutdown(context.Background())) })
	assert.Nil(t, h.p.console)
}

func TestConsoleConfigIsAComponentID(t *testing.T) {
	cfg := defaultConfig()
	cfg.Console = "faultconsole/primary"
	require.NoError(t, cfg.Validate())
	cfg.Console = "fault console!"
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `console: "fault console!" is not a component ID`)
}
