package dcgmsrc

// What a source creates and learns on one connection generation: the GPUs
// and their MIG layout, the DCGM groups and field groups. nv-hostengine
// forgets them all when it restarts, so a reconnect starts a new generation.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

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

	// Touched only inside the guard's "health" calls, which never overlap.
	health healthWatch
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
