package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// spansPerRequest bounds the spans of one request to the traces pipeline:
// a dump's operations go out in requests of at most this many (the batch
// processor's send_batch_max_size in the agent's config), each committed
// once accepted, so that the spans of a 20,000-entry dump are never all
// built at once.
const spansPerRequest = 2048

// pendingEntry is an operation seen scheduled or started, waiting for a
// later dump of its rank to show how it ended.
type pendingEntry struct {
	op    analysis.Op
	res   rankResource
	since time.Time
}

// pendingEntryBytes is what one pending operation holds: the entry and its
// share of the map that holds it.
const pendingEntryBytes = int64(unsafe.Sizeof(pendingEntry{})) + 64

// syncPending charges the pending operations to the decode budget.
func (r *ncclReceiver) syncPending() {
	n := 0
	for _, entries := range r.pending {
		n += len(entries)
	}
	r.budget.set("pending", int64(n)*pendingEntryBytes)
}

// emitDump emits each operation of a rank's dump once: completed or
// timed-out ones now, the others when a later dump shows how they ended or
// when incomplete_after passes without one. Operations go in record-id
// order (progress is a watermark), at most spansPerRequest spans a
// request; each request's progress, pending operations and metrics are
// committed once the traces pipeline accepted it. An error is the
// pipeline's refusal: what was not committed is emitted when the dump is
// read again. committed says whether any request was.
func (r *ncclReceiver) emitDump(ctx context.Context, dir string, res rankResource, rk *analysis.Rank) (committed bool, err error) {
	rankKey := dir + "/" + strconv.Itoa(res.rank)
	order := make([]int32, len(rk.Ops))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(rk.Ops[a].RecordID, rk.Ops[b].RecordID) })

	progress := &rankProgress{Watermark: -1}
	if cur := r.state.Ranks[rankKey]; cur != nil {
		progress = cur.clone()
	}
	pendingIDs := map[int64]bool{}
	for _, id := range progress.Pending {
		pendingIDs[id] = true
	}
	now := r.now()
	for start := 0; start < len(order); {
		td, spans := newRankTraces(res, r.set.BuildInfo.Version)
		added := map[int64]*pendingEntry{}
		var removed []int64
		var emitted []*analysis.Op
		i := start
		for ; i < len(order) && spans.Len() < spansPerRequest; i++ {
			op := &rk.Ops[order[i]]
			if op.RecordID <= progress.Watermark && !pendingIDs[op.RecordID] {
				continue // emitted from an earlier dump
			}
			if op.State == frdump.StateCompleted || op.TimedOut() {
				entrySpan(spans.AppendEmpty(), res, op)
				emitted = append(emitted, op)
				delete(pendingIDs, op.RecordID)
				delete(added, op.RecordID)
				removed = append(removed, op.RecordID)
			} else {
				pendingIDs[op.RecordID] = true
				p := added[op.RecordID]
				if p == nil {
					p = r.pending[rankKey][op.RecordID]
				}
				if p != nil {
					added[op.RecordID] = &pendingEntry{op: *op, res: p.res, since: p.since} // a copy: p is committed state
				} else {
					added[op.RecordID] = &pendingEntry{op: *op, res: res, since: now}
				}
			}
			progress.Watermark = max(progress.Watermark, op.RecordID)
		}
		if err := r.consumeTraces(ctx, td); err != nil {
			return committed, err
		}
		committed = true
		progress.Pending = sortedIDs(pendingIDs)
		r.state.Ranks[rankKey] = progress.clone()
		pending := r.pending[rankKey]
		if pending == nil {
			pending = map[int64]*pendingEntry{}
			r.pending[rankKey] = pending
		}
		for _, id := range removed {
			delete(pending, id)
		}
		for id, p := range added {
			pending[id] = p
		}
		if len(pending) == 0 {
			delete(r.pending, rankKey)
		}
		for _, op := range emitted {
			r.recordEntry(res, op)
		}
		start = i
	}
	return committed, nil
}

// recordEntry adds an emitted operation to the metrics.
func (r *ncclReceiver) recordEntry(res rankResource, e *analysis.Op) {
	k := seriesKey{job: res.job, attempt: res.attempt, hasAttempt: res.hasAttempt, rank: res.rank, collective: collectiveName(e.ProfilingName), pg: e.PGName}
	switch {
	case e.TimedOut():
		r.metrics.notCompleted(k, true)
	case e.State != frdump.StateCompleted:
		r.metrics.notCompleted(k, false)
	case e.HasDuration:
		r.metrics.duration(k, time.Duration(e.DurationMs*float64(time.Millisecond)))
	}
}

// flushIncomplete emits operations that stayed scheduled or started for
// incomplete_after without a newer dump: the hang is the signal. A rank's
// operations stay pending until the traces pipeline accepted their spans.
func (r *ncclReceiver) flushIncomplete(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cutoff := r.now().Add(-r.cfg.FlightRecorder.IncompleteAfter)
	flushed := false
	for rankKey, entries := range r.pending {
		var due []*pendingEntry
		for _, p := range entries {
			if p.since.Before(cutoff) {
				due = append(due, p)
			}
		}
		if len(due) == 0 {
			continue
		}
		sort.Slice(due, func(i, j int) bool { return due[i].op.RecordID < due[j].op.RecordID })
		for len(due) > 0 {
			n := min(len(due), spansPerRequest)
			td, spans := newRankTraces(due[0].res, r.set.BuildInfo.Version)
			for _, p := range due[:n] {
				entrySpan(spans.AppendEmpty(), p.res, &p.op)
			}
			if err := r.consumeTraces(ctx, td); err != nil {
				r.logger.Warn(fmt.Sprintf("ncclflightreceiver: the traces pipeline refused the spans of %d operations not completed; emitting them again at the next flush",
					len(due)), zap.String("rank", rankKey), zap.Error(err))
				break // still pending
			}
			progress := r.state.rank(rankKey)
			remaining := map[int64]bool{}
			for _, id := range progress.Pending {
				remaining[id] = true
			}
			for _, p := range due[:n] {
				r.recordEntry(p.res, &p.op)
				delete(entries, p.op.RecordID)
				delete(remaining, p.op.RecordID)
			}
			progress.Pending = sortedIDs(remaining)
			flushed = true
			due = due[n:]
		}
		if len(entries) == 0 {
			delete(r.pending, rankKey)
		}
	}
	if flushed {
		r.syncPending()
		r.emitMetrics(ctx)
		r.save(ctx)
	}
}

func sortedIDs(set map[int64]bool) []int64 {
	ids := make([]int64, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
