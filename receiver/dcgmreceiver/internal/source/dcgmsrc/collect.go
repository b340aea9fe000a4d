package dcgmsrc

// Collect: one guarded call per GPU reads its device and profiling fields,
// then those of its MIG instances.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// splitFields sorts and dedupes the requested fields into device and
// profiling ones. Labels (the driver version) are not read as values: they
// come with the GPU's identity.
func splitFields(fields []model.FieldID) (device, profiling []model.FieldID) {
	for _, id := range fields {
		f, known := model.FieldByID(id)
		switch {
		case known && f.Kind == model.Label:
		case (known && f.Profiling) || (!known && id > 1000 && id < 1100): // DCGM_FI_PROF_* ids
			profiling = append(profiling, id)
		default:
			device = append(device, id)
		}
	}
	slices.Sort(device)
	slices.Sort(profiling)
	return slices.Compact(device), slices.Compact(profiling)
}

// collectRequest is what every GPU reads in one collection.
type collectRequest struct {
	device, profiling []model.FieldID
	profilingOn       bool
	profEpoch         int
}

// gpuResult is what one GPU's calls returned.
type gpuResult struct {
	values      []model.Value
	err         error // the device fields could not be read
	profErr     error // the profiling fields could not be watched or read
	profRead    bool  // profiling values were read
	unsupported []model.FieldID
	migValues   [][]model.Value // per gpuState.migs, once they were read
	migErr      error           // the MIG instances could not be read
}

// Collect reads the fields of every GPU: one guarded call per GPU, all at
// once, so a GPU that hangs is reported Unresponsive while the others are
// read. It fails only when DCGM itself cannot be reached.
func (s *Source) Collect(ctx context.Context, fields []model.FieldID) (model.Snapshot, error) {
	conn := s.conn.Load()
	if conn == nil {
		return model.Snapshot{}, fmt.Errorf("dcgmreceiver: dcgm: collect before start")
	}
	gen, err := conn.connect(ctx)
	if err != nil {
		return model.Snapshot{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.stateLocked(ctx, conn, gen)
	if err != nil {
		return model.Snapshot{}, err
	}

	req := collectRequest{profEpoch: s.prof.epoch}
	req.device, req.profiling = splitFields(fields)
	req.profilingOn = len(req.profiling) > 0 && !s.now().Before(s.prof.retryAt)

	results := make([]gpuResult, len(st.gpus))
	callErrs := make([]error, len(st.gpus))
	var wg sync.WaitGroup
	for i, g := range st.gpus {
		wg.Go(func() {
			out := make(chan gpuResult, 1)
			callErrs[i] = s.guard.Do(ctx, gpuKey(g.id), s.cfg.CallTimeout, func() error {
				out <- s.collectGPU(conn, st, g, req)
				return nil
			})
			if callErrs[i] == nil {
				results[i] = <-out
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return model.Snapshot{}, fmt.Errorf("dcgmreceiver: dcgm: collecting: %w", err)
	}

	snap := model.Snapshot{Time: s.now(), GPUs: make([]model.GPUSample, 0, len(st.gpus))}
	var profErr error
	profRead := false
	for i, g := range st.gpus {
		r := results[i]
		sample := model.GPUSample{GPU: g.gpu(), Values: r.values}
		switch {
		case callErrs[i] != nil:
			sample.Unresponsive = true
			s.setHealthLocked(sample.GPU, gpuUnresponsive, callErrs[i])
		case r.err != nil && isConnectionLost(r.err):
			return model.Snapshot{}, fmt.Errorf("dcgmreceiver: dcgm: reading GPU %d: %w", g.id, r.err)
		case r.err != nil && isGPULost(r.err):
			sample.Unresponsive = true
			s.setHealthLocked(sample.GPU, gpuUnresponsive, r.err)
		case r.err != nil:
			s.setHealthLocked(sample.GPU, gpuFailing, r.err)
		default:
			s.setHealthLocked(sample.GPU, gpuOK, nil)
		}
		if r.profErr != nil {
			if isConnectionLost(r.profErr) {
				return model.Snapshot{}, fmt.Errorf("dcgmreceiver: dcgm: reading GPU %d: %w", g.id, r.profErr)
			}
			profErr = r.profErr
		}
		profRead = profRead || r.profRead
		if len(r.unsupported) > 0 && !s.unsupportedLogged[g.id] {
			s.unsupportedLogged[g.id] = true
			s.logger.Info("GPU does not support some profiling fields; leaving them out",
				gpuFields(sample.GPU), zap.Strings("fields", fieldNames(r.unsupported)))
		}
		if len(g.migs) > 0 && callErrs[i] == nil && r.err == nil {
			if isConnectionLost(r.migErr) {
				return model.Snapshot{}, fmt.Errorf("dcgmreceiver: dcgm: reading the MIG instances of GPU %d: %w", g.id, r.migErr)
			}
			s.setMIGHealthLocked(sample.GPU, r.migErr)
		}
		snap.GPUs = append(snap.GPUs, sample)
		snap.GPUs = append(snap.GPUs, migSamples(g, sample, r)...)
	}
	switch {
	case profErr != nil:
		s.profilingRefusedLocked(profErr)
	case profRead:
		s.profilingReadLocked()
	}
	return snap, nil
}

// collectGPU runs inside the guard's call for g: it learns what it needs
// about the GPU, makes sure its watches exist, and reads its values, then
// those of its MIG instances.
func (s *Source) collectGPU(conn *Connection, st *genState, g *gpuState, req collectRequest) gpuResult {
	r := s.collectWhole(conn, st, g, req)
	if len(g.migs) > 0 && r.err == nil {
		s.collectMIG(conn, st, g, req, &r)
	}
	return r
}

// collectWhole reads the GPU itself.
func (s *Source) collectWhole(conn *Connection, st *genState, g *gpuState, req collectRequest) gpuResult {
	var r gpuResult
	gen := st.gen
	g.mu.Lock()
	infoKnown, profKnown := g.infoKnown, g.profKnown
	g.mu.Unlock()

	if !infoKnown {
		if err := readDeviceInfo(conn, gen, g); err != nil {
			r.err = err
			return r
		}
	}

	if len(req.profiling) > 0 && !profKnown {
		var groups []metricGroup
		err := conn.do(gen, func(a api) error {
			var err error
			groups, err = a.SupportedMetricGroups(g.id)
			return err
		})
		if code, ok := statusOf(err); err == nil || (ok && (code == stProfilingNotSupported || code == stNotSupported || code == stModuleNotLoaded)) {
			// Older and GeForce GPUs answer "not supported": no profiling field.
			supported := map[model.FieldID]bool{}
			for _, mg := range groups {
				for _, f := range mg.Fields {
					supported[f] = true
				}
			}
			g.mu.Lock()
			g.profKnown, g.profSupported = true, supported
			g.mu.Unlock()
			profKnown = true
		} else if isConnectionLost(err) {
			r.err = err
			return r
		}
	}

	err := ensureGroup(conn, gen, g, &g.whole, func(a api) (handle, error) {
		return a.CreateGPUGroup(s.objectName(gen, gpuKey(g.id), 0), []uint{g.id})
	})
	if err != nil {
		r.err = fmt.Errorf("creating the GPU group: %w", err)
		return r
	}

	if len(req.device) > 0 {
		raw, err := s.watchAndRead(conn, st, g, &g.whole, req.device, s.cfg.CollectionInterval, false, req.profEpoch,
			func(a api) ([]fieldValue, error) { return a.LatestValues(g.id, req.device) })
		if err != nil {
			r.err = err
			return r
		}
		r.values = modelValues(raw)
	}

	if len(req.profiling) == 0 || !profKnown {
		return r
	}
	var fields []model.FieldID
	fields, r.unsupported = g.profilingFields(req.profiling)
	if !req.profilingOn || len(fields) == 0 {
		return r
	}
	raw, err := s.watchAndRead(conn, st, g, &g.whole, fields, s.cfg.ProfilingInterval, true, req.profEpoch,
		func(a api) ([]fieldValue, error) { return a.LatestValues(g.id, fields) })
	if err != nil {
		r.profErr = err
		return r
	}
	r.values = append(r.values, modelValues(raw)...)
	r.profRead = true
	return r
}

// profilingFields splits the requested profiling fields into those g
// supports and those it does not; none is supported until it is known.
func (g *gpuState) profilingFields(requested []model.FieldID) (supported, unsupported []model.FieldID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.profKnown {
		return nil, nil
	}
	for _, f := range requested {
		if g.profSupported[f] {
			supported = append(supported, f)
		} else {
			unsupported = append(unsupported, f)
		}
	}
	return supported, unsupported
}

// readDeviceInfo fills in g's identity. It runs inside the guard's call
// for g.
func readDeviceInfo(conn *Connection, gen uint64, g *gpuState) error {
	var info deviceInfo
	err := conn.do(gen, func(a api) error {
		var err error
		info, err = a.DeviceInfo(g.id)
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the device attributes: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.info.UUID, g.info.Model, g.info.PCIBusID, g.info.DriverVersion = info.UUID, info.Model, info.PCIBusID, info.DriverVersion
	g.infoKnown = true
	return nil
}

// watchAndRead watches fields on w's group (once per generation, or per
// profiling epoch) and reads their latest values with read. For profiling
// fields, a value whose status says the counters are taken is an error: the
// caller backs off.
func (s *Source) watchAndRead(conn *Connection, st *genState, g *gpuState, w *watchGroup, fields []model.FieldID, every time.Duration, profiling bool, epoch int, read func(api) ([]fieldValue, error)) ([]fieldValue, error) {
	fg, err := s.fieldGroup(conn, st, fields)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	watched := w.watched[fg] && (!profiling || w.profEpoch == epoch)
	group := w.group
	g.mu.Unlock()
	if !watched {
		err := conn.do(st.gen, func(a api) error {
			// One sample kept: only the latest value is read.
			return a.Watch(fg, group, every, 0, 1)
		})
		if err != nil {
			return nil, fmt.Errorf("watching fields %s: %w", fieldsKey(fields), err)
		}
		g.mu.Lock()
		w.watched[fg] = true
		if profiling {
			w.profEpoch = epoch
		}
		g.mu.Unlock()
	}
	var raw []fieldValue
	err = conn.do(st.gen, func(a api) error {
		var err error
		raw, err = read(a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading fields %s: %w", fieldsKey(fields), err)
	}
	for _, v := range raw {
		if v.Status == stNotWatched {
			// DCGM dropped the watch (profiling does when another
			// profiler takes the counters): watch again next time.
			g.mu.Lock()
			delete(w.watched, fg)
			g.mu.Unlock()
		}
		if profiling && (v.Status == stNotWatched || isProfilingRefused(&statusError{Code: v.Status})) {
			return nil, fmt.Errorf("reading field %d: %w", v.Field, &statusError{Code: v.Status, Msg: "profiling counters unavailable"})
		}
	}
	return raw, nil
}

// modelValues keeps the readings among raw (see fieldValue.toModel).
func modelValues(raw []fieldValue) []model.Value {
	values := make([]model.Value, 0, len(raw))
	for _, v := range raw {
		if mv, ok := v.toModel(); ok {
			values = append(values, mv)
		}
	}
	return values
}

func fieldNames(ids []model.FieldID) []string {
	names := make([]string, len(ids))
	for i, id := range ids {
		if f, ok := model.FieldByID(id); ok {
			names[i] = f.Name
		} else {
			names[i] = strconv.Itoa(int(id))
		}
	}
	return names
}
