package dcgmsrc

import (
	"context"
	"slices"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// xidKeepAge is how long DCGM keeps XID samples for us: every occurrence
// between two polls, however many, and across a short outage.
const xidKeepAge = time.Hour

// xidDedupeMargin keeps occurrences a little older than the since-time in
// the dedupe set, in case DCGM returns the boundary sample again.
const xidDedupeMargin = time.Minute

// xidKey identifies one XID occurrence.
type xidKey struct {
	gpu  uint
	ts   int64
	code int64
}

// xidState is where XID reading stands (under Source.xidMu). It outlives
// connection generations, so a reconnect neither repeats nor skips one.
type xidState struct {
	since time.Time // the next GetValuesSince starts here
	seen  map[xidKey]struct{}
}

func newXIDState() xidState { return xidState{seen: map[xidKey]struct{}{}} }

// startXIDs starts the poll loop. Occurrences from before the first
// successful Start are not reported: they belong to an earlier run.
func (s *Source) startXIDs(sink source.XIDSink) {
	s.xidMu.Lock()
	s.xid.since = s.now()
	s.xidMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.xidCancel, s.xidDone = cancel, done
	go func() {
		defer close(done)
		ticker := time.NewTicker(s.cfg.XIDPollInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				for _, e := range s.pollXIDs(ctx) {
					sink(e)
				}
			}
		}
	}()
}

// pollXIDs returns the XIDs DCGM recorded since the last poll, each once,
// in time order. While DCGM is unreachable it returns nothing and keeps the
// since-time, so the next successful poll catches up. (What nv-hostengine
// itself dropped while down is lost; the kmsg source still sees it.)
func (s *Source) pollXIDs(ctx context.Context) []model.XIDEvent {
	conn := s.conn.Load()
	if conn == nil {
		return nil
	}
	gen, err := conn.connect(ctx)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	st, err := s.stateLocked(ctx, conn, gen)
	s.mu.Unlock()
	if err != nil || len(st.gpus) == 0 {
		return nil
	}

	s.xidMu.Lock()
	since := s.xid.since
	s.xidMu.Unlock()

	type result struct {
		values []fieldValue
		next   time.Time
	}
	out := make(chan result, 1)
	err = s.guard.Do(ctx, "xid", s.cfg.CallTimeout, func() error {
		if err := s.watchXIDs(conn, st); err != nil {
			return err
		}
		var r result
		err := conn.do(gen, func(a api) error {
			var err error
			r.values, r.next, err = a.ValuesSince(st.xidGroup, st.xidFieldGroup, since)
			return err
		})
		if err != nil {
			return err
		}
		out <- r
		return nil
	})
	if err != nil {
		return nil
	}
	r := <-out

	gpus := s.identifyXIDGPUs(ctx, conn, st, r.values)

	s.xidMu.Lock()
	defer s.xidMu.Unlock()
	var events []model.XIDEvent
	latest := s.xid.since
	for _, v := range r.values {
		if v.Field != model.FieldXIDErrors || v.Status != 0 || v.Type != fieldTypeInt64 ||
			model.IsBlankInt64(v.Int) || v.Int <= 0 || v.TS <= 0 {
			continue
		}
		key := xidKey{gpu: v.GPU, ts: v.TS, code: v.Int}
		if _, dup := s.xid.seen[key]; dup {
			continue
		}
		s.xid.seen[key] = struct{}{}
		gpu, ok := gpus[v.GPU]
		if !ok {
			gpu = model.GPU{Index: int(v.GPU)}
		}
		at := time.UnixMicro(v.TS)
		events = append(events, model.XIDEvent{Time: at, GPU: gpu, Code: int(v.Int), Source: "dcgm"})
		if at.After(latest) {
			latest = at
		}
	}
	// Move forward only: DCGM's next since-time, or the newest occurrence
	// (whose repeat the dedupe set absorbs).
	if r.next.After(latest) {
		latest = r.next
	}
	s.xid.since = latest
	floor := latest.Add(-xidDedupeMargin).UnixMicro()
	for key := range s.xid.seen {
		if key.ts < floor {
			delete(s.xid.seen, key)
		}
	}
	slices.SortStableFunc(events, func(a, b model.XIDEvent) int { return a.Time.Compare(b.Time) })
	return events
}

// watchXIDs makes sure the XID field is watched on every GPU of st, keeping
// every sample for xidKeepAge. It runs inside the guard's "xid" calls.
func (s *Source) watchXIDs(conn *Connection, st *genState) error {
	if st.xidWatched {
		return nil
	}
	fg, err := s.fieldGroup(conn, st, []model.FieldID{model.FieldXIDErrors})
	if err != nil {
		return err
	}
	ids := make([]uint, len(st.gpus))
	for i, g := range st.gpus {
		ids[i] = g.id
	}
	return conn.do(st.gen, func(a api) error {
		group, err := a.CreateGPUGroup(s.objectName(st.gen, "xid", 0), ids)
		if err != nil {
			return err
		}
		if err := a.Watch(fg, group, s.cfg.XIDPollInterval, xidKeepAge, 0); err != nil {
			_ = a.DestroyGPUGroup(group)
			return err
		}
		st.xidGroup, st.xidFieldGroup, st.xidWatched = group, fg, true
		return nil
	})
}

// identifyXIDGPUs returns the identity of the GPUs in st, first reading it
// for the GPUs named in values that no collection has identified yet. A GPU
// that does not answer is named by its index alone.
func (s *Source) identifyXIDGPUs(ctx context.Context, conn *Connection, st *genState, values []fieldValue) map[uint]model.GPU {
	gpus := make(map[uint]model.GPU, len(st.gpus))
	for _, g := range st.gpus {
		g.mu.Lock()
		known := g.infoKnown
		g.mu.Unlock()
		if !known && slices.ContainsFunc(values, func(v fieldValue) bool { return v.GPU == g.id }) {
			_ = s.guard.Do(ctx, gpuKey(g.id), s.cfg.CallTimeout, func() error {
				return readDeviceInfo(conn, st.gen, g)
			})
		}
		gpus[g.id] = g.gpu()
	}
	return gpus
}
