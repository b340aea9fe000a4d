package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// Retry bounds of a source that cannot start (no libdcgm, host engine down).
const (
	retryInitial = time.Second
	retryMax     = 5 * time.Minute
	// xidBuffer bounds XID events waiting for the logs pipeline.
	xidBuffer = 4096
)

// attributor tells which workload owns a GPU (internal/attribution).
type attributor interface {
	Refresh(ctx context.Context, gpus []model.GPU, pids map[string][]int) error
	Owner(gpu model.GPU) model.Owner
}

// dependencies are what the receiver is built from; tests replace them to
// drive the real receiver through the hardware seam.
type dependencies struct {
	metricsSource source.Metrics
	xidSources    []source.XIDs
	attributor    attributor // nil: no attribution
	// processes lists each GPU's pids for Slurm attribution; nil when the
	// metrics source cannot and no NVML lister was configured.
	processes source.Processes
	// podLabels holds the labels of the node's pods; nil when
	// attribution::kubernetes::pod_labels is off.
	podLabels podLabeler
	now       func() time.Time
}

// dcgmReceiver serves both the metrics and the logs pipeline of one config:
// one source, one set of GPU state.
type dcgmReceiver struct {
	cfg    *Config
	set    receiver.Settings
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	deps   dependencies

	nextMetrics consumer.Metrics // nil when not in a metrics pipeline
	nextLogs    consumer.Logs    // nil when not in a logs pipeline

	metrics *metricsBuilder
	logs    *logsBuilder

	mu           sync.Mutex
	gpus         []model.GPU // last GPUs seen, to resolve kernel-log XIDs by PCI bus id
	xidCounts    map[string]map[int]int64
	unresponsive map[string]bool
	health       healthState // owned by the collection loop

	xidEvents chan model.XIDEvent
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func newDCGMReceiver(cfg *Config, set receiver.Settings, deps dependencies) (*dcgmReceiver, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	xids, err := newXIDCatalogue(cfg.XIDCatalogue)
	if err != nil {
		return nil, err
	}
	if deps.now == nil {
		deps.now = time.Now
	}
	fields, err := newFieldSet(cfg.Collectors, cfg.Naming)
	if err != nil {
		return nil, fmt.Errorf("collectors: %w", err)
	}
	host := hostName(cfg, set.Logger)
	start := pcommon.NewTimestampFromTime(deps.now())
	mb := newMetricsBuilder(cfg.Naming, host, set.BuildInfo.Version, start)
	mb.fields = fields
	if deps.podLabels != nil {
		mb.podLabels = deps.podLabels.Labels
	}
	return &dcgmReceiver{
		cfg:          cfg,
		set:          set,
		logger:       set.Logger,
		tb:           tb,
		deps:         deps,
		metrics:      mb,
		logs:         &logsBuilder{hostName: host, version: set.BuildInfo.Version, xids: xids},
		xidCounts:    map[string]map[int]int64{},
		unresponsive: map[string]bool{},
		xidEvents:    make(chan model.XIDEvent, xidBuffer),
	}, nil
}

// Start launches the collection loop and returns at once: a node without
// DCGM or a GPU keeps running its other receivers while this one retries.
func (r *dcgmReceiver) Start(_ context.Context, _ component.Host) error {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if r.deps.podLabels != nil {
		r.deps.podLabels.Start()
	}
	r.run(func() { r.collectLoop(ctx) })
	r.run(func() { r.xidLoop(ctx) })
	for _, xs := range r.deps.xidSources {
		r.run(func() {
			if err := xs.Run(ctx, r.onXID); err != nil && ctx.Err() == nil {
				r.logger.Warn("dcgmreceiver: XID source stopped", zap.Error(err))
			}
		})
	}
	return nil
}

func (r *dcgmReceiver) run(fn func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
}

// Shutdown stops the loops and the source. It waits for the loops only as
// long as ctx allows, and each of the two steps never longer than
// call_timeout: a driver call stuck inside cgo must not hang the collector,
// whose shutdown context has no deadline (SIGTERM would then wait for the
// kubelet's SIGKILL). A stuck call is left behind and named in the error.
func (r *dcgmReceiver) Shutdown(ctx context.Context) error {
	callTimeout := r.callTimeout()
	if r.cancel != nil {
		r.cancel()
	}
	var errs []error
	loops, cancelLoops := context.WithTimeout(ctx, callTimeout)
	defer cancelLoops()
	if !waitUntil(loops, r.wg.Wait) {
		errs = append(errs, errors.New("dcgmreceiver: shutdown: a collection is still running (a driver call may be stuck)"))
	}
	if r.deps.podLabels != nil {
		r.deps.podLabels.Stop()
	}
	// The source is released even when ctx has ended (it then gives up its
	// waits at once), and waited for at most another call_timeout, ctx or
	// not: one deaf to ctx is stuck in the driver.
	release, cancelRelease := context.WithTimeout(ctx, callTimeout)
	defer cancelRelease()
	released := make(chan error, 1) // buffered: a late release does not block
	go func() {
		var errs []error
		if r.deps.metricsSource != nil {
			errs = append(errs, r.deps.metricsSource.Shutdown(release))
		}
		if l, ok := r.deps.processes.(*processLister); ok {
			errs = append(errs, l.Shutdown(release))
		}
		released <- errors.Join(errs...)
	}()
	timer := time.NewTimer(callTimeout)
	defer timer.Stop()
	select {
	case err := <-released:
		errs = append(errs, err)
	case <-timer.C:
		select {
		case err := <-released: // done at the same moment
			errs = append(errs, err)
		default:
			errs = append(errs, fmt.Errorf("dcgmreceiver: shutdown: releasing the GPU source did not finish within call_timeout (%s): a driver call may be stuck", callTimeout))
		}
	}
	return errors.Join(errs...)
}

// callTimeout is call_timeout, or its default where a config built in code
// left it unset (Validate refuses 0 in a collector's config).
func (r *dcgmReceiver) callTimeout() time.Duration {
	if r.cfg == nil || r.cfg.CallTimeout <= 0 {
		return defaultCallTimeout
	}
	return r.cfg.CallTimeout
}

// waitUntil runs wait in a goroutine and reports whether it returned before
// ctx ended.
func waitUntil(ctx context.Context, wait func()) bool {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// onXID is the sink every source calls, from its own goroutine. It never
// blocks: a full buffer drops the event and counts it.
func (r *dcgmReceiver) onXID(ev model.XIDEvent) {
	select {
	case r.xidEvents <- ev:
	default:
		r.tb.DcgmXidEventsDropped.Add(context.Background(), 1)
	}
}

// collectLoop starts the source (with backoff) and collects device and
// profiling fields, each on its own interval.
func (r *dcgmReceiver) collectLoop(ctx context.Context) {
	if r.deps.metricsSource == nil || r.nextMetrics == nil && r.nextLogs == nil {
		return
	}
	if !r.startSource(ctx) {
		return
	}
	deviceFields, profilingFields := r.metrics.fields.device, r.metrics.fields.profiling
	device := time.NewTicker(r.cfg.CollectionInterval)
	defer device.Stop()
	var profiling <-chan time.Time
	if r.cfg.ProfilingInterval > 0 {
		t := time.NewTicker(r.cfg.ProfilingInterval)
		defer t.Stop()
		profiling = t.C
	}
	var refresh <-chan time.Time
	if r.deps.attributor != nil {
		t := time.NewTicker(r.cfg.Attribution.RefreshInterval)
		defer t.Stop()
		refresh = t.C
	}
	failing := false
	collect := func(fields []model.FieldID) {
		err := r.collect(ctx, fields)
		switch {
		case err != nil && !failing:
			r.logger.Warn("dcgmreceiver: collection failing; retrying every interval", zap.Error(err))
			failing = true
		case err == nil && failing:
			r.logger.Info("dcgmreceiver: collection recovered")
			failing = false
		}
		if err != nil {
			r.tb.DcgmCollectErrors.Add(ctx, 1)
		}
	}
	collect(deviceFields)
	r.checkHealth(ctx)
	r.refreshOwners(ctx)
	if profiling != nil {
		collect(profilingFields)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-device.C:
			collect(deviceFields)
			r.checkHealth(ctx)
		case <-profiling:
			collect(profilingFields)
		case <-refresh:
			r.refreshOwners(ctx)
		}
	}
}

// startSource calls Start until it succeeds or ctx ends, logging once per
// state change rather than on every attempt.
func (r *dcgmReceiver) startSource(ctx context.Context) bool {
	up := metric.WithAttributes(attribute.String(metadata.TelemetryAttrSource, r.cfg.Source))
	wait := retryInitial
	logged := false
	for {
		err := r.deps.metricsSource.Start(ctx, r.onXID)
		if err == nil {
			r.tb.DcgmSourceUp.Record(ctx, 1, up)
			if logged {
				r.logger.Info("dcgmreceiver: GPU source connected", zap.String("source", r.cfg.Source))
			}
			return true
		}
		r.tb.DcgmSourceUp.Record(ctx, 0, up)
		if !logged {
			r.logger.Warn("dcgmreceiver: GPU source unavailable; retrying with backoff, other receivers keep running",
				zap.String("source", r.cfg.Source), zap.Error(err))
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(wait*2, retryMax)
	}
}

func (r *dcgmReceiver) collect(ctx context.Context, fields []model.FieldID) error {
	snap, err := r.deps.metricsSource.Collect(ctx, fields)
	if err != nil {
		return err
	}
	if snap.ForeignSamples > 0 {
		r.tb.DcgmForeignSamples.Add(ctx, int64(snap.ForeignSamples))
	}
	if snap.Time.IsZero() {
		snap.Time = r.deps.now()
	}
	r.noteGPUs(ctx, snap)
	if r.nextMetrics == nil || len(snap.GPUs) == 0 {
		return nil
	}
	r.mu.Lock()
	counts := make(map[string]map[int]int64, len(r.xidCounts))
	for k, v := range r.xidCounts {
		counts[k] = cloneCounts(v)
	}
	r.mu.Unlock()
	md := r.metrics.build(snap, r.owner, counts)
	return r.nextMetrics.ConsumeMetrics(ctx, md)
}

func cloneCounts(m map[int]int64) map[int]int64 {
	c := make(map[int]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// noteGPUs remembers the GPUs (to resolve kernel-log XIDs) and reports each
// change of a GPU's responsiveness once, as a log record.
func (r *dcgmReceiver) noteGPUs(ctx context.Context, snap model.Snapshot) {
	gpus := make([]model.GPU, 0, len(snap.GPUs))
	var changed []model.GPUSample
	r.mu.Lock()
	for _, s := range snap.GPUs {
		gpus = append(gpus, s.GPU)
		k := gpuKey(s.GPU)
		if r.unresponsive[k] != s.Unresponsive {
			r.unresponsive[k] = s.Unresponsive
			changed = append(changed, s)
		}
	}
	if len(gpus) > 0 {
		r.gpus = gpus
	}
	r.mu.Unlock()
	for _, s := range changed {
		if s.Unresponsive {
			r.logger.Error("dcgmreceiver: GPU does not answer driver calls", zap.Int("gpu", s.GPU.Index), zap.String("uuid", s.GPU.UUID))
		} else if r.nextLogs == nil {
			continue
		}
		if r.nextLogs != nil {
			if err := r.nextLogs.ConsumeLogs(ctx, r.logs.unresponsiveLogs(s.GPU, r.owner(s), s.Unresponsive, snap.Time)); err != nil {
				// Refused (a full queue): forget the change, so that the
				// next collection reports it again.
				r.mu.Lock()
				r.unresponsive[gpuKey(s.GPU)] = !s.Unresponsive
				r.mu.Unlock()
				r.logger.Warn("dcgmreceiver: GPU responsiveness record refused by the logs pipeline; reported again at the next collection",
					zap.String("uuid", s.GPU.UUID), zap.Error(err))
			}
		}
	}
}

func (r *dcgmReceiver) owner(s model.GPUSample) model.Owner {
	if !s.Owner.IsZero() || r.deps.attributor == nil {
		return s.Owner
	}
	return r.deps.attributor.Owner(s.GPU)
}

func (r *dcgmReceiver) refreshOwners(ctx context.Context) {
	if r.deps.attributor == nil {
		return
	}
	r.mu.Lock()
	gpus := append([]model.GPU(nil), r.gpus...)
	r.mu.Unlock()
	var pids map[string][]int
	if r.deps.processes != nil {
		var err error
		if pids, err = r.deps.processes.Processes(ctx); err != nil {
			r.logger.Debug("dcgmreceiver: cannot list GPU processes for Slurm attribution", zap.Error(err))
		}
	}
	// Failures are logged by the attributor once per state change; metrics
	// go out without the attributes meanwhile.
	_ = r.deps.attributor.Refresh(ctx, gpus, pids)
}

// resolveGPU completes what a source knew of a GPU (the kernel log names
// only the PCI bus id) from the GPUs the metrics source reported.
func (r *dcgmReceiver) resolveGPU(g model.GPU) model.GPU {
	if g.UUID != "" && g.Model != "" {
		return g
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, known := range r.gpus {
		if known.MIG != nil {
			continue
		}
		if (g.UUID != "" && known.UUID == g.UUID) || (g.PCIBusID != "" && equalBusID(known.PCIBusID, g.PCIBusID)) {
			return known
		}
	}
	return g
}
