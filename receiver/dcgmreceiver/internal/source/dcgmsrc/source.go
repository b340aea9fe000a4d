// Package dcgmsrc is the dcgm receiver's default source: NVIDIA DCGM
// through go-dcgm, standalone (a running nv-hostengine) or embedded.
//
// Everything DCGM does wrong in production is handled here rather than in
// the receiver: a missing libdcgm.so.4 (Start fails, no other call is ever
// made), nv-hostengine restarting (reconnect, re-create the field groups,
// no duplicate or lost XIDs), profiling counters taken by Nsight/CUPTI
// (back off, keep the device fields), GPUs that do not support profiling
// (fields dropped with one log line per GPU), a GPU whose calls hang
// (reported Unresponsive, the others go on, Shutdown does not wait), and
// DCGM's blank / not-supported sentinels (never emitted).
//
// MIG: each GPU instance of a GPU in MIG mode is a sample of its own, right
// after its parent's (see mig.go).
package dcgmsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/dcgmsrc"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// Defaults for the zero values of Config.
const (
	DefaultCollectionInterval = 10 * time.Second
	DefaultProfilingInterval  = 30 * time.Second
	DefaultXIDPollInterval    = time.Second
	DefaultCallTimeout        = 5 * time.Second
)

// Profiling back-off once DCGM refuses the counters: starts at the
// profiling interval, doubles, stops growing here.
const maxProfilingBackoff = 5 * time.Minute

// shutdownWait is how long Shutdown waits for calls still running.
const shutdownWait = 100 * time.Millisecond

// Config is the dcgm source's configuration.
type Config struct {
	// Mode is ModeStandalone (default) or ModeEmbedded.
	Mode Mode
	// Endpoint of nv-hostengine in standalone mode: host:port, or a unix
	// socket as /path or unix:///path. Default DefaultEndpoint.
	Endpoint string
	// CollectionInterval is how often DCGM samples the device fields (the
	// receiver's collection_interval). Default 10 s.
	CollectionInterval time.Duration
	// ProfilingInterval is how often DCGM samples the profiling fields
	// (profiling_interval), and the first back-off when it refuses them.
	// Default 30 s.
	ProfilingInterval time.Duration
	// XIDPollInterval is how often new XIDs are read. Default 1 s.
	XIDPollInterval time.Duration
	// CallTimeout bounds the DCGM calls for one GPU in one collection; a GPU
	// that takes longer is reported Unresponsive. Default 5 s.
	CallTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeStandalone
	}
	if c.Mode == ModeStandalone && c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if c.CollectionInterval <= 0 {
		c.CollectionInterval = DefaultCollectionInterval
	}
	if c.ProfilingInterval <= 0 {
		c.ProfilingInterval = DefaultProfilingInterval
	}
	if c.XIDPollInterval <= 0 {
		c.XIDPollInterval = DefaultXIDPollInterval
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	return c
}

// Source reads GPU fields and XIDs from DCGM. It implements source.Metrics.
type Source struct {
	conns  *Connections
	cfg    Config
	logger *zap.Logger
	now    func() time.Time
	guard  *hang.Guard
	id     int

	conn atomic.Pointer[Connection] // set by the first Start that acquires it

	startMu   sync.Mutex
	stopped   bool
	xidCancel context.CancelFunc
	xidDone   chan struct{}

	mu                sync.Mutex // serialises Collect and the discovery of GPUs
	st                *genState
	prof              profilingState
	health            map[uint]gpuHealth
	unsupportedLogged map[uint]bool
	migFailing        map[uint]bool // GPUs whose MIG instances could not be read

	xidMu sync.Mutex
	xid   xidState
}

var _ source.Metrics = (*Source)(nil)

// New returns a dcgm source that shares conns' connection with every other
// source built from the same registry. It connects in Start.
func New(conns *Connections, cfg Config, logger *zap.Logger) *Source {
	return &Source{
		conns:             conns,
		cfg:               cfg.withDefaults(),
		logger:            logger,
		now:               conns.now,
		guard:             hang.NewGuard(),
		id:                conns.newSourceID(),
		health:            map[uint]gpuHealth{},
		unsupportedLogged: map[uint]bool{},
		migFailing:        map[uint]bool{},
		xid:               newXIDState(),
	}
}

// Start connects to DCGM. It fails at once, without retrying, when DCGM is
// unreachable or libdcgm.so.4 is missing: the receiver calls it again with
// back-off, and the connection itself also spaces out attempts. Once
// connected, it starts reading XIDs into xids (when not nil).
func (s *Source) Start(ctx context.Context, xids source.XIDSink) error {
	s.startMu.Lock()
	if s.stopped {
		s.startMu.Unlock()
		return fmt.Errorf("dcgmreceiver: dcgm: start after shutdown")
	}
	conn := s.conn.Load()
	if conn == nil {
		var err error
		if conn, err = s.conns.Acquire(s.cfg.Mode, s.cfg.Endpoint, s.logger); err != nil {
			s.startMu.Unlock()
			return err
		}
		s.conn.Store(conn)
	}
	s.startMu.Unlock()

	// Not under startMu: a slow Init must not hold up Shutdown.
	if _, err := conn.connect(ctx); err != nil {
		return err
	}

	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.stopped {
		return fmt.Errorf("dcgmreceiver: dcgm: shut down while starting")
	}
	if xids != nil && s.xidCancel == nil {
		s.startXIDs(xids)
	}
	return nil
}

// Shutdown stops reading XIDs, removes this source's DCGM groups and gives
// back its connection reference. It does not wait for a stuck call.
func (s *Source) Shutdown(ctx context.Context) error {
	s.startMu.Lock()
	if s.stopped {
		s.startMu.Unlock()
		return nil
	}
	s.stopped = true
	cancel, done := s.xidCancel, s.xidDone
	s.startMu.Unlock()

	if cancel != nil {
		cancel()
		<-done // the poll honours its context, so this is prompt
	}
	if conn := s.conn.Load(); conn != nil {
		s.removeDCGMObjects(ctx, conn)
		conn.Release()
	}
	wctx, wcancel := context.WithTimeout(ctx, shutdownWait)
	defer wcancel()
	if err := s.guard.Wait(wctx); err != nil {
		s.logger.Warn("A DCGM call is still stuck at shutdown; leaving it behind", zap.Error(err))
	}
	return nil
}

// genState is what this source created or learnt on one connection
// generation; a reconnect starts a new one (nv-hostengine forgot it all).
type genState struct {
	gen  uint64
	gpus []*gpuState

	fgMu        sync.Mutex // field groups are created from several GPUs' calls
	fieldGroups map[string]handle

	// Touched only inside the guard's "xid" calls, which never overlap.
	xidGroup, xidFieldGroup handle
	xidWatched              bool
}

// gpuState is one GPU on one generation. Its DCGM objects are created and
// used only inside the guard's calls for this GPU, which never overlap; mu
// covers the fields Collect also reads.
type gpuState struct {
	id   uint
	migs []migInstance // its MIG GPU instances, fixed for the generation

	mu            sync.Mutex
	info          model.GPU
	infoKnown     bool
	profKnown     bool
	profSupported map[model.FieldID]bool
	whole         watchGroup // the GPU itself
	mig           watchGroup // its MIG GPU instances
}

// watchGroup is a DCGM group (of a GPU, or of its MIG GPU instances) and
// the field groups watched on it. gpuState.mu covers it.
type watchGroup struct {
	group     handle
	created   bool
	watched   map[handle]bool
	profEpoch int // the profiling epoch its profiling watches belong to
}

func newWatchGroup() watchGroup { return watchGroup{watched: map[handle]bool{}} }

// take empties w, returning what it held so that it can be removed.
func (w *watchGroup) take() (group handle, created bool, watched []handle) {
	group, created = w.group, w.created
	for fg := range w.watched {
		watched = append(watched, fg)
	}
	*w = newWatchGroup()
	return group, created, watched
}

func (g *gpuState) gpu() model.GPU {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.info
}

// gpuHealth is what was last logged about a GPU.
type gpuHealth uint8

const (
	gpuOK gpuHealth = iota
	gpuUnresponsive
	gpuFailing
)

// profilingState is the profiling back-off (under Source.mu).
type profilingState struct {
	stopped bool // "stopped" was logged and "resumed" not yet
	retryAt time.Time
	backoff time.Duration
	epoch   int // bumped when profiling stops: every watch is redone
}

func gpuKey(id uint) string { return "gpu" + strconv.FormatUint(uint64(id), 10) }

func fieldsKey(fields []model.FieldID) string {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(f)))
	}
	return b.String()
}

// objectName names a DCGM group: unique per process, source and object, as
// nv-hostengine is shared with other clients.
func (s *Source) objectName(gen uint64, kind string, n int) string {
	return fmt.Sprintf("otelcolgpu_%d_%d_%d_%s_%d", os.Getpid(), s.id, gen, kind, n)
}

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

// stateLocked returns the state of generation gen, listing the GPUs the
// first time. Callers hold s.mu.
func (s *Source) stateLocked(ctx context.Context, conn *Connection, gen uint64) (*genState, error) {
	if s.st != nil && s.st.gen == gen {
		return s.st, nil
	}
	var (
		ids       []uint
		instances []gpuInstance
		migErr    error
	)
	err := s.guard.Do(ctx, "devices", s.cfg.CallTimeout, func() error {
		err := conn.do(gen, func(a api) error {
			var err error
			ids, err = a.SupportedDevices()
			return err
		})
		if err != nil {
			return err
		}
		// The MIG layout is read once per connection: changing it needs
		// the GPU idle, and a reconnect reads it again.
		migErr = conn.do(gen, func(a api) error {
			var err error
			instances, err = a.MIGHierarchy()
			return err
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dcgmreceiver: dcgm: listing GPUs: %w", err)
	}
	if migErr != nil {
		if isConnectionLost(migErr) {
			return nil, fmt.Errorf("dcgmreceiver: dcgm: listing MIG instances: %w", migErr)
		}
		s.logger.Warn("Could not read DCGM's MIG hierarchy; reporting whole GPUs only until DCGM reconnects", zap.Error(migErr))
	}
	slices.Sort(ids)
	st := &genState{gen: gen, fieldGroups: map[string]handle{}}
	for _, id := range slices.Compact(ids) {
		g := &gpuState{
			id:    id,
			migs:  migInstancesOf(id, instances),
			info:  model.GPU{Index: int(id), Device: fmt.Sprintf("nvidia%d", id)},
			whole: newWatchGroup(),
			mig:   newWatchGroup(),
		}
		if len(g.migs) > 0 {
			s.logger.Info("GPU is in MIG mode; reporting each GPU instance", zap.Uint("gpu", id), zap.Strings("mig_instances", migNames(g.migs)))
		}
		st.gpus = append(st.gpus, g)
	}
	s.st = st
	return st, nil
}

// fieldGroup returns the field group of exactly these fields on st,
// creating it once.
func (s *Source) fieldGroup(conn *Connection, st *genState, fields []model.FieldID) (handle, error) {
	key := fieldsKey(fields)
	st.fgMu.Lock()
	defer st.fgMu.Unlock()
	if h, ok := st.fieldGroups[key]; ok {
		return h, nil
	}
	var h handle
	err := conn.do(st.gen, func(a api) error {
		var err error
		h, err = a.CreateFieldGroup(s.objectName(st.gen, "fields", len(st.fieldGroups)), fields)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("creating the field group %s: %w", key, err)
	}
	st.fieldGroups[key] = h
	return h, nil
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

// ensureGroup creates w's DCGM group, once per generation. It runs inside
// the guard's call for g.
func ensureGroup(conn *Connection, gen uint64, g *gpuState, w *watchGroup, create func(api) (handle, error)) error {
	g.mu.Lock()
	created := w.created
	g.mu.Unlock()
	if created {
		return nil
	}
	var group handle
	err := conn.do(gen, func(a api) error {
		var err error
		group, err = create(a)
		return err
	})
	if err != nil {
		return err
	}
	g.mu.Lock()
	w.group, w.created = group, true
	g.mu.Unlock()
	return nil
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

// profilingRefusedLocked backs profiling off after DCGM refused it, saying
// so once until it resumes.
func (s *Source) profilingRefusedLocked(err error) {
	p := &s.prof
	p.backoff = min(max(2*p.backoff, s.cfg.ProfilingInterval), max(maxProfilingBackoff, s.cfg.ProfilingInterval))
	p.retryAt = s.now().Add(p.backoff)
	p.epoch++
	if !p.stopped {
		p.stopped = true
		s.logger.Warn("DCGM profiling fields unavailable (another profiler such as Nsight or CUPTI may hold the counters); device fields continue, retrying with back-off",
			zap.Error(err), zap.Duration("retry_in", p.backoff))
	}
}

// profilingReadLocked notes a successful profiling read.
func (s *Source) profilingReadLocked() {
	p := &s.prof
	if p.stopped {
		s.logger.Info("DCGM profiling fields available again")
	}
	p.stopped, p.backoff, p.retryAt = false, 0, time.Time{}
}

// setHealthLocked logs a GPU's health when it changes.
func (s *Source) setHealthLocked(gpu model.GPU, h gpuHealth, err error) {
	id := uint(gpu.Index)
	prev := s.health[id]
	if prev == h {
		return
	}
	s.health[id] = h
	switch h {
	case gpuUnresponsive:
		s.logger.Warn("GPU did not answer in time; reporting it unresponsive", gpuFields(gpu), zap.Error(err))
	case gpuFailing:
		s.logger.Warn("Reading GPU failed", gpuFields(gpu), zap.Error(err))
	case gpuOK:
		s.logger.Info("GPU answers again", gpuFields(gpu))
	}
}

func gpuFields(g model.GPU) zap.Field {
	return zap.Dict("gpu", zap.Int("index", g.Index), zap.String("uuid", g.UUID), zap.String("model", g.Model))
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

// removeDCGMObjects unwatches and destroys this source's groups, best
// effort and within the call timeout: nv-hostengine may be shared with
// other receivers that keep running.
func (s *Source) removeDCGMObjects(ctx context.Context, conn *Connection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if st == nil {
		return
	}
	if gen, up := conn.generation(); !up || gen != st.gen {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, g := range st.gpus {
		wg.Go(func() {
			_ = s.guard.Do(ctx, gpuKey(g.id), s.cfg.CallTimeout, func() error {
				g.mu.Lock()
				wholeGroup, wholeCreated, wholeWatched := g.whole.take()
				migGroup, migCreated, migWatched := g.mig.take()
				g.mu.Unlock()
				remove := func(group handle, created bool, watched []handle) error {
					if !created {
						return nil
					}
					return conn.do(st.gen, func(a api) error {
						for _, fg := range watched {
							_ = a.Unwatch(fg, group)
						}
						return a.DestroyGPUGroup(group)
					})
				}
				return errors.Join(remove(wholeGroup, wholeCreated, wholeWatched), remove(migGroup, migCreated, migWatched))
			})
		})
	}
	wg.Wait()
	_ = s.guard.Do(ctx, "xid", s.cfg.CallTimeout, func() error {
		if !st.xidWatched {
			return nil
		}
		st.xidWatched = false
		return conn.do(st.gen, func(a api) error {
			_ = a.Unwatch(st.xidFieldGroup, st.xidGroup)
			return a.DestroyGPUGroup(st.xidGroup)
		})
	})
	_ = s.guard.Do(ctx, "fieldgroups", s.cfg.CallTimeout, func() error {
		st.fgMu.Lock()
		defer st.fgMu.Unlock()
		for key, fg := range st.fieldGroups {
			_ = conn.do(st.gen, func(a api) error { return a.DestroyFieldGroup(fg) })
			delete(st.fieldGroups, key)
		}
		return nil
	})
	s.st = nil
}
