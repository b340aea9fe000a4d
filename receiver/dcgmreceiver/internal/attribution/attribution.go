// Package attribution maps each GPU to the workload that owns it, so every
// GPU metric can carry its Kubernetes pod or Slurm job:
//
//   - Kubernetes: the kubelet pod-resources API lists the devices of every
//     container (nvidia.com/gpu, nvidia.com/gpu.*, nvidia.com/mig-*).
//   - Slurm, declared: dcgm-exporter's HPC job-mapping directory, one file
//     per GPU index ("3", or "3.1" for GPU instance 1 of GPU 3) holding the
//     job id.
//   - Slurm, observed: the GPU's processes (pids from DCGM/NVML), their
//     /proc/<pid>/cgroup path (…/job_<id>/…) or SLURM_JOB_ID in their
//     environment.
//
// training.job.id is TORCHELASTIC_RUN_ID from a GPU process's environment
// when torchrun set a real one, else the Slurm job id.
//
// When one GPU is claimed by several workloads (time-slicing, several jobs
// in one mapping file) the first one listed wins: metric attributes hold one
// value. When both Slurm sources know a GPU, the mapping directory wins: it
// is what the scheduler declared, and it also covers GPUs with no process.
//
// A source that fails (socket absent, permission denied, unreadable file)
// is logged once when it starts failing and once when it recovers; until
// then its attributes are left out, never served stale, and the other
// sources' results are kept.
package attribution // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/attribution"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// Defaults used where Settings leaves a field zero.
const (
	DefaultKubeletSocket    = "/var/lib/kubelet/pod-resources/kubelet.sock"
	DefaultHPCJobMappingDir = "/var/lib/dcgm-exporter/job-mapping" // the GPU Operator's default
	DefaultProcRoot         = "/proc"
	DefaultRefreshInterval  = 30 * time.Second
	DefaultTimeout          = 5 * time.Second
)

// Settings says which sources to use and where they are. Zero paths and
// durations take the defaults above.
type Settings struct {
	// Kubelet enables the pod-resources API at KubeletSocket.
	Kubelet       bool
	KubeletSocket string
	// HPCJobMapping enables the job-mapping directory HPCJobMappingDir.
	HPCJobMapping    bool
	HPCJobMappingDir string
	// SlurmProcesses enables reading the GPU processes' cgroup and
	// environment under ProcRoot. The pids are host pids, so in a container
	// ProcRoot must be the host's /proc (and the container needs hostPID or
	// a mount of it); reading other users' environ needs CAP_SYS_PTRACE.
	SlurmProcesses bool
	ProcRoot       string
	// RefreshInterval is how often the receiver should call Refresh; the
	// Attributor does not run a timer itself.
	RefreshInterval time.Duration
	// Timeout bounds the kubelet call and the whole /proc scan of one
	// Refresh.
	Timeout time.Duration
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	if s.RefreshInterval < 0 {
		return fmt.Errorf("dcgmreceiver: attribution: refresh interval %s is negative", s.RefreshInterval)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("dcgmreceiver: attribution: timeout %s is negative", s.Timeout)
	}
	return nil
}

func (s Settings) withDefaults() Settings {
	if s.KubeletSocket == "" {
		s.KubeletSocket = DefaultKubeletSocket
	}
	if s.HPCJobMappingDir == "" {
		s.HPCJobMappingDir = DefaultHPCJobMappingDir
	}
	if s.ProcRoot == "" {
		s.ProcRoot = DefaultProcRoot
	}
	if s.RefreshInterval == 0 {
		s.RefreshInterval = DefaultRefreshInterval
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	return s
}

// Attributor holds the latest GPU → owner map. Refresh rebuilds it; Owner
// reads it without locking and is safe to call from any goroutine.
type Attributor struct {
	settings Settings
	logger   *zap.Logger
	// procGuard bounds /proc reads: reading a process's environ takes its
	// memory-map lock, which a process stuck in the GPU driver can hold.
	procGuard *hang.Guard
	// readProcessFiles reads one /proc/<pid> directory; tests replace it to
	// simulate a read that hangs.
	readProcessFiles func(dir string) (processJob, error)

	refreshMu sync.Mutex // one Refresh at a time; guards the health states
	kubelet   sourceHealth
	hpc       sourceHealth
	procs     sourceHealth

	table atomic.Pointer[ownerTable]
}

// New returns an Attributor with an empty map; call Refresh to fill it.
func New(settings Settings, logger *zap.Logger) (*Attributor, error) {
	if err := settings.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Attributor{
		settings:         settings.withDefaults(),
		logger:           logger,
		procGuard:        hang.NewGuard(),
		readProcessFiles: readProcessFiles,
		kubelet:          sourceHealth{name: "kubelet pod-resources"},
		hpc:              sourceHealth{name: "HPC job mapping"},
		procs:            sourceHealth{name: "Slurm processes"},
	}
	a.table.Store(&ownerTable{})
	return a, nil
}

// RefreshInterval is the interval the receiver should call Refresh on.
func (a *Attributor) RefreshInterval() time.Duration { return a.settings.RefreshInterval }

// Refresh rebuilds the map from every enabled source. gpus is the node's
// GPU list (it resolves device indexes and nvidia<N> names to GPUs); pids
// maps a GPU UUID to the pids of its processes.
//
// A failing source is logged (once per change of state) and contributes
// nothing; Refresh still succeeds. It returns an error only when ctx ends
// first, and then leaves the previous map in place.
func (a *Attributor) Refresh(ctx context.Context, gpus []model.GPU, pids map[string][]int) error {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dcgmreceiver: attribution: refresh: %w", err)
	}

	next := &ownerTable{}
	var kubeletErr, hpcErr, procErr error
	if a.settings.Kubelet {
		next.pods, kubeletErr = a.readKubelet(ctx, gpus)
	}
	if a.settings.HPCJobMapping {
		next.hpcJobs, hpcErr = a.readHPCJobMapping(ctx, gpus)
	}
	if a.settings.SlurmProcesses {
		next.procJobs, procErr = a.readProcesses(ctx, gpus, pids)
	}

	// Errors caused by the caller giving up say nothing about the sources.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dcgmreceiver: attribution: refresh: %w", err)
	}
	if a.settings.Kubelet {
		a.kubelet.report(a.logger, kubeletErr)
	}
	if a.settings.HPCJobMapping {
		a.hpc.report(a.logger, hpcErr)
	}
	if a.settings.SlurmProcesses {
		a.procs.report(a.logger, procErr)
	}
	a.table.Store(next)
	return nil
}

// Owner returns what the last Refresh learned about gpu's owner, matched by
// UUID, device name or index (MIG instances by their GPU instance id, then
// by their parent GPU). It is the zero Owner when nothing is known.
func (a *Attributor) Owner(gpu model.GPU) model.Owner {
	t := a.table.Load()
	var owner model.Owner
	if pod, ok := t.pods.lookup(gpu); ok {
		owner.PodName, owner.Namespace, owner.Container = pod.name, pod.namespace, pod.container
	}
	proc, procKnown := t.procJobs.lookup(gpu)
	if job, ok := t.hpcJobs.lookup(gpu); ok {
		owner.SlurmJobID = job
	} else if procKnown {
		owner.SlurmJobID = proc.slurmJobID
	}
	// torchrun's run id belongs to this owner only if it came from the
	// same job (or from a process outside Slurm).
	if procKnown && proc.runID != "" && (proc.slurmJobID == "" || proc.slurmJobID == owner.SlurmJobID) {
		owner.TrainingJobID = proc.runID
	} else {
		owner.TrainingJobID = owner.SlurmJobID
	}
	return owner
}

// ownerTable is one Refresh's result. It is never changed once stored, so
// Owner reads it without a lock.
type ownerTable struct {
	pods     deviceMap[podOwner]
	hpcJobs  deviceMap[string]
	procJobs deviceMap[processJob]
}

type podOwner struct{ name, namespace, container string }

// sourceHealth remembers whether a source is failing so that the change,
// not every refresh, is logged.
type sourceHealth struct {
	name    string
	failing bool
}

func (h *sourceHealth) report(logger *zap.Logger, err error) {
	switch {
	case err != nil && !h.failing:
		h.failing = true
		msg := "GPU attribution source failing; metrics go out without its attributes until it recovers"
		if errors.Is(err, fs.ErrNotExist) {
			// Expected on nodes without that scheduler: not a warning.
			logger.Info(msg, zap.String("source", h.name), zap.Error(err))
		} else {
			logger.Warn(msg, zap.String("source", h.name), zap.Error(err))
		}
	case err != nil:
		logger.Debug("GPU attribution source still failing", zap.String("source", h.name), zap.Error(err))
	case h.failing:
		h.failing = false
		logger.Info("GPU attribution source recovered", zap.String("source", h.name))
	}
}
