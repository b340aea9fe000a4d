package nvmlsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// noInstance is NVML's "not in a MIG instance" id in event data.
const noInstance = 0xFFFFFFFF

// xidWatcher delivers NVML's critical XID events from its own goroutine.
type xidWatcher struct {
	set     nvml.EventSet
	devices []*device
	syms    *symbols
	sink    source.XIDSink
	wait    time.Duration
	logger  *zap.Logger
	guard   *hang.Guard
	timeout time.Duration

	// ctx ends at stop; done is closed when the goroutine has returned.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// startXIDs registers every GPU for critical XID events and starts the
// goroutine that waits for them. XIDs are best effort: when NVML cannot
// deliver them (no event set, no GPU supports them) it logs why and
// returns nil, and the metrics still flow.
func (s *Source) startXIDs(ctx context.Context, inv inventory, sink source.XIDSink) *xidWatcher {
	var (
		set nvml.EventSet
		ret nvml.Return
	)
	err := s.guard.Do(ctx, keyEvents, s.callTimeout, func() error {
		set, ret = s.lib.EventSetCreate()
		return nil
	})
	// set and ret are only safe to read once the call returned.
	if err == nil && ret != nvml.SUCCESS {
		err = ret
	}
	if err == nil && set == nil {
		err = errors.New("no event set returned")
	}
	if err != nil {
		s.logger.Warn("NVML event set not available; no XID events from NVML", zap.Error(err))
		return nil
	}

	registered := 0
	for _, d := range inv.devices {
		c := &caller{ctx: ctx, guard: s.guard, key: d.key, timeout: s.callTimeout, logger: s.logger, syms: inv.syms}
		_, ok := call(c, "RegisterEvents", func() (struct{}, nvml.Return) {
			return struct{}{}, d.handle.RegisterEvents(nvml.EventTypeXidCriticalError, set)
		})
		if ok {
			d.xidRegistered = true
			registered++
		} else {
			s.logger.Debug("GPU does not deliver XID events through NVML", zap.Int("gpu", d.gpu.Index))
		}
	}

	w := &xidWatcher{
		set:     set,
		devices: inv.devices,
		syms:    inv.syms,
		sink:    sink,
		wait:    s.xidWait,
		logger:  s.logger,
		guard:   s.guard,
		timeout: s.callTimeout,
		done:    make(chan struct{}),
	}
	if registered == 0 {
		s.logger.Info("no GPU delivers XID events through NVML")
		if err := w.free(ctx); err != nil {
			s.logger.Warn("freeing the NVML event set", zap.Error(err))
		}
		return nil
	}
	// The goroutine outlives Start's ctx: it runs until stop.
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go w.run()
	return w
}

// run waits for events until stop. Each wait is short so stop is noticed.
func (w *xidWatcher) run() {
	defer close(w.done)
	waitMs := uint32(max(w.wait.Milliseconds(), 1))
	lastErr := nvml.SUCCESS
	for {
		if w.ctx.Err() != nil {
			return
		}
		data, ret := w.set.Wait(waitMs)
		switch ret {
		case nvml.SUCCESS:
			lastErr = nvml.SUCCESS
			w.deliver(data)
		case nvml.ERROR_TIMEOUT:
		default:
			if ret != lastErr {
				w.logger.Warn("waiting for NVML events failed", zap.Error(ret))
				lastErr = ret
			}
			// The wait failed at once: pause, so a lasting error does not spin.
			select {
			case <-w.ctx.Done():
				return
			case <-time.After(w.wait):
			}
		}
	}
}

// deliver hands one event to the sink, naming the GPU (or the MIG device)
// it happened on.
func (w *xidWatcher) deliver(data nvml.EventData) {
	if data.EventType&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	ev := model.XIDEvent{
		Time:   time.Now(),
		Code:   int(data.EventData),
		Source: "nvml",
		GPU:    model.GPU{Index: -1}, // unknown until matched
	}
	if d := w.find(data.Device); d != nil {
		d.lastXID.Store(int64(data.EventData))
		ev.GPU = d.gpu
		if mig := d.migOf(data.GpuInstanceId, data.ComputeInstanceId); mig != nil {
			ev.GPU = mig.gpu
		}
	} else {
		w.logger.Warn("XID event for a GPU the nvml source does not know", zap.Int("xid", ev.Code))
	}
	w.sink(ev)
}

// find returns the device an event names: by handle, else by UUID.
func (w *xidWatcher) find(handle nvml.Device) *device {
	if handle == nil {
		return nil
	}
	for _, d := range w.devices {
		if sameHandle(d.handle, handle) {
			return d
		}
	}
	c := &caller{ctx: w.ctx, guard: w.guard, key: keyEvents, timeout: w.timeout, logger: w.logger, syms: w.syms}
	uuid, ok := call(c, "GetUUID", handle.GetUUID)
	if !ok {
		return nil
	}
	for _, d := range w.devices {
		if d.gpu.UUID == uuid {
			return d
		}
	}
	return nil
}

// sameHandle compares two device handles without panicking on handle
// types that cannot be compared.
func sameHandle(a, b nvml.Device) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || ta == nil || !ta.Comparable() {
		return false
	}
	return a == b
}

// migOf returns the MIG device an event's instance ids name, if any.
func (d *device) migOf(gpuInstance, computeInstance uint32) *migDevice {
	if gpuInstance == noInstance {
		return nil
	}
	for i := range d.migs {
		mig := d.migs[i].gpu.MIG
		if mig.GPUInstanceID != int(gpuInstance) {
			continue
		}
		if computeInstance == noInstance || mig.ComputeInstanceID == int(computeInstance) {
			return &d.migs[i]
		}
	}
	return nil
}

// stop ends the goroutine and frees the event set. It gives up when ctx
// ends; the event set is then left allocated, as the goroutine may still
// be inside a wait on it. stop on a nil watcher does nothing.
func (w *xidWatcher) stop(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return w.free(ctx)
}

// free releases the event set once nothing waits on it.
func (w *xidWatcher) free(ctx context.Context) error {
	var ret nvml.Return
	if err := w.guard.Do(ctx, keyEvents, w.timeout, func() error {
		ret = w.set.Free()
		return nil
	}); err != nil {
		return err
	}
	return returnError(ret)
}
