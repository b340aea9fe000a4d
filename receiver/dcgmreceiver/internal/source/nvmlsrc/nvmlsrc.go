// Package nvmlsrc is the `nvml` source of the dcgm receiver: it reads GPU
// telemetry straight from NVML (github.com/NVIDIA/go-nvml) on nodes that
// run no DCGM host engine, and reports it under DCGM's field ids so the
// receiver's output does not depend on the source.
//
// What NVML gives, per catalogue field (model/fields.go):
//
//	DCGM_FI_DEV_GPU_UTIL, _MEM_COPY_UTIL   GetUtilizationRates (%)
//	DCGM_FI_DEV_ENC_UTIL, _DEC_UTIL        GetEncoderUtilization, GetDecoderUtilization (%)
//	DCGM_FI_DEV_FB_TOTAL/_FREE/_USED       GetMemoryInfo_v2 (or GetMemoryInfo), bytes -> MiB
//	DCGM_FI_DEV_FB_RESERVED                GetMemoryInfo_v2 only
//	DCGM_FI_DEV_GPU_TEMP                   GetTemperature(TEMPERATURE_GPU) (C)
//	DCGM_FI_DEV_MEMORY_TEMP                GetFieldValues(FI_DEV_MEMORY_TEMP) (C), HBM parts only
//	DCGM_FI_DEV_POWER_USAGE                GetPowerUsage, mW -> W
//	DCGM_FI_DEV_POWER_MGMT_LIMIT           GetPowerManagementLimit, mW -> W
//	DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION   GetTotalEnergyConsumption (mJ)
//	DCGM_FI_DEV_SM_CLOCK, _MEM_CLOCK       GetClockInfo(CLOCK_SM / CLOCK_MEM) (MHz)
//	DCGM_FI_DEV_CLOCKS_EVENT_REASONS       GetCurrentClocksEventReasons, or
//	                                       GetCurrentClocksThrottleReasons on drivers without it (bitmask)
//	DCGM_FI_DEV_*_VIOLATION                GetViolationStatus (ns, as DCGM reports them)
//	DCGM_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL  GetTotalEccErrors (corrected = SBE, uncorrected = DBE)
//	DCGM_FI_DEV_RETIRED_SBE/_DBE/_PENDING  GetRetiredPages (count per cause), GetRetiredPagesPendingStatus
//	DCGM_FI_DEV_*_REMAPPED_ROWS, _ROW_REMAP_FAILURE  GetRemappedRows
//	DCGM_FI_DEV_PCIE_REPLAY_COUNTER        GetPcieReplayCounter
//	DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL GetNvLinkErrorCounter, summed over the active links
//	DCGM_FI_DEV_XID_ERRORS                 the last critical XID event seen (0 until one arrives)
//
// Left out: the profiling fields (DCGM_FI_PROF_*), which only DCGM's
// profiling module measures, and DCGM_FI_DRIVER_VERSION, which is a string:
// the driver version is in every GPU's identity instead. A reading NVML
// answers with ERROR_NOT_SUPPORTED (or any other error) is left out of the
// sample, never reported as a sentinel.
//
// MIG: when a GPU has MIG mode on at Start, each MIG device is reported as
// its own sample (best effort): the parent's identity (index, UUID, PCI bus
// id, device node, as dcgm-exporter labels MIG instances) plus the GPU
// instance id, compute instance id and the profile parsed from the MIG
// device's name. NVML reports per instance only framebuffer memory, so a MIG
// sample carries the DCGM_FI_DEV_FB_* fields; the device-wide readings stay
// on the parent. MIG layouts and the device list are read at Start only.
//
// Every NVML call for a GPU goes through a hang.Guard with a per-call
// deadline: a GPU whose call hangs (one that fell off the bus can block
// inside the driver) is reported Unresponsive with no values while the
// others keep going, and it stays Unresponsive until the stuck call returns.
package nvmlsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// DefaultCallTimeout bounds one NVML call when New is given no timeout.
const DefaultCallTimeout = 5 * time.Second

// defaultXIDWait is how long one EventSetWait blocks: short, so the event
// goroutine notices Shutdown quickly.
const defaultXIDWait = 500 * time.Millisecond

// Guard keys of the calls that are not about one GPU.
const (
	keyInit     = "nvml/init"
	keyEvents   = "nvml/events"
	keyShutdown = "nvml/shutdown"
)

// Source reads GPU telemetry from NVML. It implements source.Metrics.
type Source struct {
	lib         nvml.Interface
	logger      *zap.Logger
	callTimeout time.Duration
	xidWait     time.Duration
	guard       *hang.Guard

	profilingOnce sync.Once // logs once that profiling fields are not available

	mu      sync.Mutex
	started bool
	epoch   int // bumped by Shutdown, so a Start that overlaps it gives up
	devices []*device
	syms    *symbols
	xids    *xidWatcher
}

var _ source.Metrics = (*Source)(nil)

// device is one physical GPU.
type device struct {
	gpu    model.GPU
	handle nvml.Device
	key    string // hang.Guard key: all calls for this GPU and its MIG devices
	// nvlinks are the link indexes NVML knows on this GPU.
	nvlinks []int
	migs    []migDevice
	// xidRegistered: critical XID events are delivered for this GPU, so
	// DCGM_FI_DEV_XID_ERRORS can be reported (0 until one arrives).
	xidRegistered bool
	lastXID       atomic.Int64 // written by the XID goroutine, read by Collect
	// unresponsive remembers the last collection's verdict, so the change
	// is logged once rather than at every collection.
	unresponsive atomic.Bool
}

// migDevice is one MIG device of a GPU.
type migDevice struct {
	gpu    model.GPU
	handle nvml.Device
}

// New returns an NVML source. lib is the NVML library: nvml.New() in
// production, a mock in tests. callTimeout bounds every NVML call (zero or
// less means DefaultCallTimeout). Nothing is called until Start.
func New(lib nvml.Interface, callTimeout time.Duration, logger *zap.Logger) *Source {
	if callTimeout <= 0 {
		callTimeout = DefaultCallTimeout
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Source{
		lib:         lib,
		logger:      logger,
		callTimeout: callTimeout,
		xidWait:     defaultXIDWait,
		guard:       hang.NewGuard(),
	}
}

// Start initialises NVML, enumerates the GPUs (and their MIG devices) and,
// when xids is not nil, starts delivering critical XID events to it. An
// error means NVML is not usable now (library missing, driver not loaded):
// the receiver retries later. Calling Start on a started source does
// nothing.
func (s *Source) Start(ctx context.Context, xids source.XIDSink) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return nil
	}
	epoch := s.epoch
	s.mu.Unlock()

	if err := s.initLibrary(ctx); err != nil {
		return err
	}
	inv, err := s.enumerate(ctx)
	if err != nil {
		s.shutdownLibrary(ctx)
		return err
	}
	var watcher *xidWatcher
	if xids != nil {
		watcher = s.startXIDs(ctx, inv, xids)
	}

	s.mu.Lock()
	if s.epoch == epoch && !s.started {
		s.devices = inv.devices
		s.syms = inv.syms
		s.xids = watcher
		s.started = true
		s.mu.Unlock()
		s.logger.Info("NVML source started",
			zap.Int("gpus", len(inv.devices)),
			zap.Int("mig_devices", inv.migCount()),
			zap.String("driver_version", inv.driverVersion))
		return nil
	}
	// Shutdown or another Start ran meanwhile: undo this one (Init counts
	// references, so each successful Init needs its Shutdown).
	startedElsewhere := s.started
	s.mu.Unlock()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.callTimeout)
	defer cancel()
	if err := watcher.stop(stopCtx); err != nil {
		s.logger.Warn("stopping XID events of an abandoned start", zap.Error(err))
	}
	s.shutdownLibrary(ctx)
	if startedElsewhere {
		return nil
	}
	return errors.New("dcgmreceiver: nvml: start: shut down while starting")
}

// initLibrary calls nvmlInit, translating the usual failures into errors
// that say what to fix.
func (s *Source) initLibrary(ctx context.Context) error {
	var ret nvml.Return
	err := s.guard.Do(ctx, keyInit, s.callTimeout, func() error {
		ret = s.lib.Init()
		return nil
	})
	if err != nil {
		return fmt.Errorf("dcgmreceiver: nvml: init: %w", err)
	}
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("dcgmreceiver: nvml: init: libnvidia-ml.so.1 not found (is the NVIDIA driver installed and its library visible to the collector?): %w", ret)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("dcgmreceiver: nvml: init: NVIDIA kernel driver not loaded: %w", ret)
	case nvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("dcgmreceiver: nvml: init: no permission to open the NVIDIA device nodes: %w", ret)
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return fmt.Errorf("dcgmreceiver: nvml: init: NVML library and kernel driver versions differ (driver upgraded without reboot?): %w", ret)
	default:
		return fmt.Errorf("dcgmreceiver: nvml: init: %w", ret)
	}
}

// shutdownLibrary undoes a successful Init after a failed Start.
func (s *Source) shutdownLibrary(ctx context.Context) {
	var ret nvml.Return
	err := s.guard.Do(context.WithoutCancel(ctx), keyShutdown, s.callTimeout, func() error {
		ret = s.lib.Shutdown()
		return nil
	})
	if err == nil {
		err = returnError(ret) // ret is only safe to read once the call returned
	}
	if err != nil {
		s.logger.Warn("NVML shutdown after a failed start did not succeed", zap.Error(err))
	}
}

// Shutdown stops XID delivery and shuts NVML down. It returns when ctx
// ends even if an NVML call is stuck; NVML is then left initialised, since
// nvmlShutdown would block behind the stuck call.
func (s *Source) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.epoch++
	started := s.started
	watcher := s.xids
	s.started = false
	s.devices = nil
	s.syms = nil
	s.xids = nil
	s.mu.Unlock()
	if !started {
		return nil
	}

	var errs []error
	if err := watcher.stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("dcgmreceiver: nvml: shutdown: stopping XID events: %w", err))
	}
	if err := s.guard.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("dcgmreceiver: nvml: shutdown: NVML calls still stuck, leaving NVML initialised: %w", err))
		return errors.Join(errs...)
	}
	var ret nvml.Return
	if err := s.guard.Do(ctx, keyShutdown, s.callTimeout, func() error {
		ret = s.lib.Shutdown()
		return nil
	}); err != nil {
		errs = append(errs, fmt.Errorf("dcgmreceiver: nvml: shutdown: %w", err))
	} else if ret != nvml.SUCCESS {
		errs = append(errs, fmt.Errorf("dcgmreceiver: nvml: shutdown: %w", ret))
	}
	return errors.Join(errs...)
}

// returnError turns a non-success NVML return into an error, nil otherwise.
func returnError(ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return ret
}
