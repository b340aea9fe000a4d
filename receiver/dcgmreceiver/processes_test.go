package dcgmreceiver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// processSourceFake is a metrics source that also lists GPU processes, as
// NVML does.
type processSourceFake struct {
	*fakeSource
	pids map[string][]int
}

func (p processSourceFake) Processes(context.Context) (map[string][]int, error) { return p.pids, nil }

// A GPU's process runs in a Slurm job's cgroup: the GPU's metrics carry the
// job, through the real attribution code over a fake /proc.
func TestSlurmJobFromGPUProcesses(t *testing.T) {
	proc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "31337"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "31337", "cgroup"),
		[]byte("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "31337", "environ"),
		[]byte("SLURM_JOB_ID=4242\x00TORCHELASTIC_RUN_ID=llama-70b\x00"), 0o644))

	cfg := fastConfig()
	cfg.HostName = "xl003"
	cfg.Attribution.Slurm = SlurmAttributionConfig{Enabled: true, ProcRoot: proc}
	cfg.Attribution.RefreshInterval = 10 * time.Millisecond
	src := processSourceFake{
		fakeSource: &fakeSource{snaps: []model.Snapshot{snapshot(time.Now(), intValue(model.FieldGPUTemp, 61))}},
		pids:       map[string][]int{testGPU.UUID: {31337}},
	}
	set := receivertest.NewNopSettings(metadata.Type)
	at, err := newAttributor(cfg, set.Logger)
	require.NoError(t, err)
	require.NotNil(t, at)
	processes := processSource(cfg, src, set.Logger)
	_, isLister := processes.(*processLister)
	require.False(t, isLister, "a source that lists processes is used as it is")

	r, err := newDCGMReceiver(cfg, set, dependencies{metricsSource: src, attributor: at, processes: processes})
	require.NoError(t, err)
	sink := new(consumertest.MetricsSink)
	r.nextMetrics = sink
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()

	require.Eventually(t, func() bool {
		for _, md := range sink.AllMetrics() {
			res := md.ResourceMetrics().At(0).Resource().Attributes()
			job, ok := res.Get(semconv.AttrSlurmJobID)
			if ok && job.Str() == "4242" {
				training, _ := res.Get(semconv.AttrTrainingJobID)
				return training.Str() == "llama-70b"
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "slurm.job.id and training.job.id on the GPU's metrics")
}

// Without a source that lists processes, NVML is used beside DCGM; on a node
// without a driver it fails, says so once, and the receiver carries on.
func TestProcessListerWithoutNVML(t *testing.T) {
	cfg := fastConfig()
	cfg.Attribution.Slurm.Enabled = true
	set := receivertest.NewNopSettings(metadata.Type)
	var metrics source.Metrics = &fakeSource{}
	l, ok := processSource(cfg, metrics, set.Logger).(*processLister)
	require.True(t, ok)
	_, err := l.Processes(context.Background())
	assert.Error(t, err, "no NVML on this machine")
	require.NoError(t, l.Shutdown(context.Background()))

	cfg.Attribution.Slurm.Enabled = false
	assert.Nil(t, processSource(cfg, metrics, set.Logger))
}
