package dcgmsrc

// The Source and its lifecycle: Start, Shutdown and the removal of its DCGM
// objects from a shared nv-hostengine.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// shutdownWait is how long Shutdown waits for calls still running.
const shutdownWait = 100 * time.Millisecond

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

	nvSwitchRefusedLogged atomic.Bool // the NVSwitch watches' refusal was logged
}

var (
	_ source.Metrics = (*Source)(nil)
	_ source.Health  = (*Source)(nil)
)

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
	_ = s.guard.Do(ctx, healthGuardKey, s.cfg.CallTimeout, func() error {
		group, ok := st.health.take()
		if !ok {
			return nil
		}
		return conn.do(st.gen, func(a api) error { return a.DestroyGPUGroup(group) })
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
