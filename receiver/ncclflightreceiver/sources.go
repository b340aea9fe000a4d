package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/ras"
)

// The inspector and RAS inputs.

// pollInspector reads what the inspector files gained and emits it.
func (r *ncclReceiver) pollInspector(ctx context.Context, t *inspector.Tailer) {
	for _, dir := range r.cfg.Inspector.Directories {
		paths, err := inspector.Scan(dir, inspector.DefaultPattern)
		if err != nil {
			r.mu.Lock()
			r.warnOnce("inspector:"+dir, "ncclflightreceiver: cannot list inspector directory", zap.String("directory", dir), zap.Error(err))
			r.mu.Unlock()
			continue
		}
		t.Track(paths...)
	}
	err := t.Poll(ctx, func(_ string, records []inspector.Record) error {
		return r.emitInspector(ctx, records)
	})
	r.countInspectorLines(ctx, t.Stats())
	if err != nil && ctx.Err() == nil {
		r.logger.Debug("ncclflightreceiver: inspector poll", zap.Error(err))
	}
	if data, err := inspector.MarshalState(t.State()); err == nil {
		if err := r.storage.Set(ctx, inspectorKey, data); err != nil && ctx.Err() == nil {
			r.mu.Lock()
			r.warnOnce("save-inspector", "ncclflightreceiver: cannot save inspector offsets", zap.Error(err))
			r.mu.Unlock()
		}
	}
}

// emitInspector turns one batch of inspector lines into spans and metrics.
// The spans go in one request, and the metrics count the lines only once it
// was accepted: an error from the traces pipeline leaves the whole batch to
// be read again, none of it emitted or counted.
func (r *ncclReceiver) emitInspector(ctx context.Context, records []inspector.Record) error {
	td := ptrace.NewTraces()
	byRank := map[int]ptrace.SpanSlice{}
	for i := range records {
		rec := &records[i]
		if rec.Kind != inspector.KindCollective && rec.Kind != inspector.KindP2P {
			continue
		}
		spans, ok := byRank[rec.Rank]
		if !ok {
			spans = appendRankSpans(td, rankResource{host: r.host, job: r.cfg.JobID, rank: rec.Rank, worldSize: rec.NRanks}, r.set.BuildInfo.Version)
			byRank[rec.Rank] = spans
		}
		inspectorSpan(spans.AppendEmpty(), r.cfg.JobID, rec)
	}
	if r.nextTraces != nil && td.SpanCount() > 0 {
		if err := r.nextTraces.ConsumeTraces(ctx, td); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range records {
		rec := &records[i]
		if rec.Kind != inspector.KindCollective && rec.Kind != inspector.KindP2P {
			continue
		}
		k := seriesKey{job: r.cfg.JobID, rank: rec.Rank, collective: rec.Op, pg: rec.CommID}
		r.metrics.duration(k, rec.ExecTime)
		if !isNaN(rec.BusBWGBs) {
			r.metrics.bandwidth(k, rec.BusBWGBs)
		}
	}
	r.emitMetrics(ctx)
	return nil
}

// countInspectorLines counts the inspector lines the tailer skipped since
// the last poll (it logs the first of each file) under their reason, and
// adds them to the summary of refused inputs.
func (r *ncclReceiver) countInspectorLines(ctx context.Context, st inspector.Stats) {
	for _, c := range []struct {
		reason    string
		now, last int64
	}{{reasonMalformedLine, st.Malformed, r.inspectorStats.Malformed}, {reasonOverlongLine, st.Overlong, r.inspectorStats.Overlong}} {
		if n := c.now - c.last; n > 0 {
			r.tb.NcclflightBadInputs.Add(ctx, n, metric.WithAttributes(
				attribute.String(metadata.TelemetryAttrInput, semconv.NCCLSourceInspector), attribute.String(metadata.TelemetryAttrReason, c.reason)))
			r.rejects.count(semconv.NCCLSourceInspector, c.reason, n)
		}
	}
	r.inspectorStats = st
}

// pollRAS asks NCCL's RAS service for the job's status and reports problems
// that persisted across two polls (a rank briefly behind is normal).
func (r *ncclReceiver) pollRAS(ctx context.Context, c *ras.Client, previous []ras.Finding) []ras.Finding {
	st, err := c.Status(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			r.warned["ras"] = true
			r.reject(ctx, semconv.NCCLSourceRAS, reasonUnavailable, r.cfg.RAS.Endpoint, "RAS status unavailable, retrying every interval",
				zap.String("endpoint", r.cfg.RAS.Endpoint), zap.Error(err))
		}
		return previous
	}
	if r.warned["ras"] {
		delete(r.warned, "ras")
		r.logger.Info("ncclflightreceiver: RAS status available again")
	}
	current := ras.Findings(st, r.cfg.JobID)
	var problems []problem
	for _, f := range ras.Repeated(previous, current) {
		key := f.Key()
		if _, done := r.state.Findings[key]; done {
			continue
		}
		ranks := make([]any, len(f.Ranks))
		for i, rk := range f.Ranks {
			ranks[i] = int64(rk.Rank)
		}
		problems = append(problems, problem{source: semconv.NCCLSourceRAS, kind: string(f.Kind), key: key, message: f.Message,
			severity: plog.SeverityNumberError,
			attrs:    map[string]any{semconv.AttrNCCLCommID: f.Communicator, semconv.AttrNCCLRanks: ranks}})
	}
	if r.consumeLogs(ctx, problems, jobRef{job: r.cfg.JobID}) == nil { // else reported at the next poll: they persist
		for _, p := range problems {
			r.state.Findings[p.key] = unixNow(r.now)
		}
	}
	return current
}
