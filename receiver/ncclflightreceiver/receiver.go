package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostname"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/ras"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/watch"
)

// trailingDigits is the rank at the end of a dump's name: users put host
// names in the prefix (host-a_nccl_trace_rank_3).
var trailingDigits = regexp.MustCompile(`(\d+)$`)

// pendingEntry is an operation seen scheduled or started, waiting for a
// later dump of its rank to show how it ended.
type pendingEntry struct {
	entry frdump.Entry
	res   rankResource
	since time.Time
}

// ncclReceiver serves the traces, metrics and logs pipelines of one config.
type ncclReceiver struct {
	cfg    *Config
	set    receiver.Settings
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	host   string
	now    func() time.Time

	nextTraces  consumer.Traces
	nextMetrics consumer.Metrics
	nextLogs    consumer.Logs

	storage storage.Client

	mu      sync.Mutex // everything below: the inputs run in their own goroutines
	state   *persistedState
	latest  map[string]map[int]*frdump.Dump // directory → rank → newest dump
	pending map[string]map[int64]*pendingEntry
	metrics *collectiveMetrics
	warned  map[string]bool // log-once keys

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newNCCLReceiver(cfg *Config, set receiver.Settings) (*ncclReceiver, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	host, _ := hostname.Resolve(cfg.HostName) // "" when unknown, as before
	return &ncclReceiver{
		cfg:     cfg,
		set:     set,
		logger:  set.Logger,
		tb:      tb,
		host:    host,
		now:     time.Now,
		storage: storage.NewNopClient(),
		state:   newPersistedState(),
		latest:  map[string]map[int]*frdump.Dump{},
		pending: map[string]map[int64]*pendingEntry{},
		metrics: newCollectiveMetrics(time.Now()),
		warned:  map[string]bool{},
	}, nil
}

// Start loads what was read before a restart and starts one loop per input.
func (r *ncclReceiver) Start(ctx context.Context, host component.Host) error {
	if r.cfg.Storage != nil {
		ext, ok := host.GetExtensions()[*r.cfg.Storage]
		if !ok {
			return fmt.Errorf("ncclflightreceiver: storage: extension %q is not configured", r.cfg.Storage)
		}
		se, ok := ext.(storage.Extension)
		if !ok {
			return fmt.Errorf("ncclflightreceiver: storage: extension %q is not a storage extension", r.cfg.Storage)
		}
		client, err := se.GetClient(ctx, component.KindReceiver, r.set.ID, "")
		if err != nil {
			return fmt.Errorf("ncclflightreceiver: storage: %w", err)
		}
		r.storage = client
	}
	st, err := loadState(ctx, r.storage)
	if err != nil {
		r.logger.Warn("ncclflightreceiver: state", zap.Error(err))
	}
	if st != nil {
		r.state = st
	}

	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if fr := r.cfg.FlightRecorder; len(fr.Directories) > 0 {
		w := watch.New(watch.Options{Dirs: fr.Directories, Patterns: fr.Patterns, Rescan: fr.RescanInterval, Settle: fr.SettleTime}, r.logger)
		r.run(func() { _ = w.Run(runCtx, func(files []watch.File) { r.readDumps(runCtx, files) }) })
		r.run(func() { r.every(runCtx, fr.IncompleteAfter/4, r.flushIncomplete) })
	}
	if len(r.cfg.Inspector.Directories) > 0 {
		t := inspector.NewTailer(r.logger, inspector.Options{})
		if data, err := r.storage.Get(ctx, inspectorKey); err == nil && data != nil {
			if states, err := inspector.UnmarshalState(data); err == nil {
				t.Restore(states)
			} else {
				r.logger.Warn("ncclflightreceiver: inspector offsets in storage are damaged, reading files from the start", zap.Error(err))
			}
		}
		r.run(func() {
			defer t.Close()
			r.every(runCtx, r.cfg.Inspector.PollInterval, func(ctx context.Context) { r.pollInspector(ctx, t) })
		})
	}
	if r.cfg.RAS.Endpoint != "" {
		c := ras.New(r.cfg.RAS.Endpoint, r.cfg.RAS.Timeout, r.logger)
		var previous []ras.Finding
		r.run(func() {
			r.every(runCtx, r.cfg.RAS.Interval, func(ctx context.Context) { previous = r.pollRAS(ctx, c, previous) })
		})
	}
	return nil
}

func (r *ncclReceiver) run(fn func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
}

// every calls fn now and then on every tick until ctx ends.
func (r *ncclReceiver) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	if d <= 0 {
		d = time.Second
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Shutdown stops the inputs, emits what is pending, and saves the state.
func (r *ncclReceiver) Shutdown(ctx context.Context) error {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	err := saveState(ctx, r.storage, r.state)
	return errors.Join(err, r.storage.Close(ctx))
}

// warnOnce logs a warning the first time key is seen.
func (r *ncclReceiver) warnOnce(key, msg string, fields ...zap.Field) {
	if r.warned[key] {
		r.logger.Debug(msg, fields...)
		return
	}
	r.warned[key] = true
	r.logger.Warn(msg, fields...)
}

func (r *ncclReceiver) badInput(ctx context.Context, input string) {
	r.tb.NcclflightBadInputs.Add(ctx, 1, metric.WithAttributes(attribute.String(metadata.TelemetryAttrInput, input)))
}

// rankOf returns the rank a dump's file name ends with, else the configured
// one (-1: unknown).
func (r *ncclReceiver) rankOf(path string) int {
	base := filepath.Base(path)
	// The same dump saved as JSON (nccl_trace_rank_3.json) is the same rank.
	if ext := filepath.Ext(base); ext == ".json" || ext == ".pkl" || ext == ".pickle" {
		base = strings.TrimSuffix(base, ext)
	}
	if m := trailingDigits.FindString(base); m != "" {
		if n, err := strconv.Atoi(m); err == nil {
			return n
		}
	}
	return r.cfg.FlightRecorder.Rank
}

// readDumps decodes dumps that became complete together and emits what they
// add: spans of operations not emitted before, in one batch, and findings of
// the cross-rank analysis of each directory, run once over the newest dump of
// every rank (a partly rewritten directory would compare old and new dumps).
// The state is saved once for the batch.
func (r *ncclReceiver) readDumps(ctx context.Context, files []watch.File) {
	r.mu.Lock()
	defer r.mu.Unlock()
	td := ptrace.NewTraces()
	var dirs []string
	read := false
	for _, f := range files {
		dir, analyzable, ok := r.readDump(ctx, td, f)
		read = read || ok
		if analyzable && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool { return rs.ScopeSpans().At(0).Spans().Len() == 0 })
	r.consumeTraces(ctx, td)
	for _, dir := range dirs {
		r.analyze(ctx, dir)
	}
	if !read {
		return
	}
	r.emitMetrics(ctx)
	if err := saveState(ctx, r.storage, r.state); err != nil {
		r.warnOnce("save", "ncclflightreceiver: cannot save state; a restart may emit some spans again", zap.Error(err))
	}
}

// readDump decodes one dump and appends its new operations to td. It
// reports the dump's directory, whether the dump joined that directory's
// cross-rank analysis (its rank is known), and whether the state changed.
func (r *ncclReceiver) readDump(ctx context.Context, td ptrace.Traces, f watch.File) (dir string, analyzable, changed bool) {
	key := f.Key()
	if r.state.Dumps[f.Path].Key == key {
		return "", false, false // read before a restart
	}
	r.state.Dumps[f.Path] = readVersion{Key: key, At: unixNow(r.now)}
	data, err := watch.ReadFile(f.Path, r.cfg.FlightRecorder.MaxFileSize)
	if err != nil {
		r.badInput(ctx, semconv.NCCLSourceFlightRecorder)
		r.warnOnce("read:"+f.Path, "ncclflightreceiver: cannot read dump, skipping it", zap.String("path", f.Path), zap.Error(err))
		return "", false, true
	}
	dump, warnings, err := frdump.Parse(data)
	if err != nil {
		r.badInput(ctx, semconv.NCCLSourceFlightRecorder)
		r.logger.Warn("ncclflightreceiver: cannot decode dump, skipping it", zap.String("path", f.Path), zap.Error(err))
		return "", false, true
	}
	for _, w := range warnings {
		r.warnOnce(string(w.Kind)+":"+dump.Version.Raw, "ncclflightreceiver: dump parsed with a warning",
			zap.String("path", f.Path), zap.String("warning", w.Message))
	}
	r.tb.NcclflightDumpsRead.Add(ctx, 1)
	dir = filepath.Dir(f.Path)
	rank := r.rankOf(f.Path)
	res := rankResource{host: r.host, job: r.cfg.JobID, rank: rank, worldSize: worldSize(dump)}
	r.emitEntries(appendRankSpans(td, res, r.set.BuildInfo.Version), dir, res, dump)
	if rank < 0 {
		return dir, false, true
	}
	if r.latest[dir] == nil {
		r.latest[dir] = map[int]*frdump.Dump{}
	}
	r.latest[dir][rank] = dump
	return dir, true, true
}

// worldSize is the size of the default process group, else of the largest.
func worldSize(d *frdump.Dump) int {
	n := 0
	for _, pg := range d.PGConfig {
		if pg.Desc == "default_pg" {
			return len(pg.Ranks)
		}
		n = max(n, len(pg.Ranks))
	}
	return n
}

// emitEntries appends each operation of the dump to spans once: completed or
// timed-out ones now, the others when a later dump shows how they ended or
// when incomplete_after passes without one.
func (r *ncclReceiver) emitEntries(spans ptrace.SpanSlice, dir string, res rankResource, dump *frdump.Dump) {
	rankKey := dir + "/" + strconv.Itoa(res.rank)
	progress := r.state.rank(rankKey)
	pendingIDs := map[int64]bool{}
	for _, id := range progress.Pending {
		pendingIDs[id] = true
	}
	if r.pending[rankKey] == nil {
		r.pending[rankKey] = map[int64]*pendingEntry{}
	}
	now := r.now()
	for i := range dump.Entries {
		e := &dump.Entries[i]
		if e.RecordID <= progress.Watermark && !pendingIDs[e.RecordID] {
			continue // emitted from an earlier dump
		}
		if e.State == frdump.StateCompleted || e.TimedOut() {
			r.emitEntry(spans, res, e)
			delete(pendingIDs, e.RecordID)
			delete(r.pending[rankKey], e.RecordID)
		} else {
			pendingIDs[e.RecordID] = true
			if p := r.pending[rankKey][e.RecordID]; p != nil {
				p.entry = *e
			} else {
				r.pending[rankKey][e.RecordID] = &pendingEntry{entry: *e, res: res, since: now}
			}
		}
		progress.Watermark = max(progress.Watermark, e.RecordID)
	}
	progress.Pending = sortedIDs(pendingIDs)
}

func (r *ncclReceiver) emitEntry(spans ptrace.SpanSlice, res rankResource, e *frdump.Entry) {
	entrySpan(spans.AppendEmpty(), res, e)
	k := seriesKey{rank: res.rank, collective: collectiveName(e.ProfilingName), pg: e.PGName}
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
// incomplete_after without a newer dump: the hang is the signal.
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
		sort.Slice(due, func(i, j int) bool { return due[i].entry.RecordID < due[j].entry.RecordID })
		td, spans := newRankTraces(due[0].res, r.set.BuildInfo.Version)
		progress := r.state.rank(rankKey)
		remaining := map[int64]bool{}
		for _, id := range progress.Pending {
			remaining[id] = true
		}
		for _, p := range due {
			r.emitEntry(spans, p.res, &p.entry)
			delete(entries, p.entry.RecordID)
			delete(remaining, p.entry.RecordID)
		}
		progress.Pending = sortedIDs(remaining)
		r.consumeTraces(ctx, td)
		flushed = true
	}
	if flushed {
		r.emitMetrics(ctx)
		if err := saveState(ctx, r.storage, r.state); err != nil {
			r.warnOnce("save", "ncclflightreceiver: cannot save state; a restart may emit some spans again", zap.Error(err))
		}
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

// analyze runs the cross-rank analysis over the newest dump of every rank
// in dir and reports findings not reported before.
func (r *ncclReceiver) analyze(ctx context.Context, dir string) {
	ranks := r.latest[dir]
	dumps := make([]analysis.RankDump, 0, len(ranks))
	for rank, d := range ranks {
		dumps = append(dumps, analysis.RankDump{Rank: rank, Dump: d})
	}
	sort.Slice(dumps, func(i, j int) bool { return dumps[i].Rank < dumps[j].Rank })
	report := analysis.Analyze(dumps, analysis.DefaultOptions())
	var problems []problem
	for _, f := range report.Findings {
		key := r.cfg.JobID + "|" + dir + "|" + f.Key().String()
		if _, done := r.state.Findings[key]; done {
			continue
		}
		r.state.Findings[key] = unixNow(r.now)
		problems = append(problems, analysisProblem(f, key))
	}
	r.consumeLogs(ctx, problems)
}

func analysisProblem(f analysis.Finding, key string) problem {
	ranks := make([]any, len(f.Ranks))
	for i, rk := range f.Ranks {
		ranks[i] = int64(rk)
	}
	evidence := make(map[string]any, len(f.Evidence))
	for k, v := range f.Evidence {
		evidence[k] = v
	}
	attrs := map[string]any{
		semconv.AttrNCCLPGName:   f.PGName,
		semconv.AttrNCCLRanks:    ranks,
		semconv.AttrNCCLEvidence: evidence,
	}
	if f.PGDesc != "" {
		attrs[semconv.AttrNCCLPGDesc] = f.PGDesc
	}
	if f.Seq > 0 {
		attrs[semconv.AttrNCCLCollectiveSeq] = f.Seq
	}
	if f.ProfilingName != "" {
		attrs[semconv.AttrNCCLCollective] = collectiveName(f.ProfilingName)
	}
	sev := plog.SeverityNumberError
	if f.Kind == analysis.KindStraggler || f.Kind == analysis.KindPGStatusDivergence {
		sev = plog.SeverityNumberWarn
	}
	return problem{source: semconv.NCCLSourceFlightRecorder, kind: string(f.Kind), key: key, message: f.Message, severity: sev, attrs: attrs}
}

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
// An error from the traces pipeline leaves the batch to be read again.
func (r *ncclReceiver) emitInspector(ctx context.Context, records []inspector.Record) error {
	byRank := map[int]ptrace.SpanSlice{}
	var all []ptrace.Traces
	r.mu.Lock()
	for i := range records {
		rec := &records[i]
		if rec.Kind != inspector.KindCollective && rec.Kind != inspector.KindP2P {
			continue
		}
		spans, ok := byRank[rec.Rank]
		if !ok {
			var td ptrace.Traces
			td, spans = newRankTraces(rankResource{host: r.host, job: r.cfg.JobID, rank: rec.Rank, worldSize: rec.NRanks}, r.set.BuildInfo.Version)
			byRank[rec.Rank] = spans
			all = append(all, td)
		}
		inspectorSpan(spans.AppendEmpty(), r.cfg.JobID, rec)
		k := seriesKey{rank: rec.Rank, collective: rec.Op, pg: rec.CommID}
		r.metrics.duration(k, rec.ExecTime)
		if !isNaN(rec.BusBWGBs) {
			r.metrics.bandwidth(k, rec.BusBWGBs)
		}
	}
	r.mu.Unlock()
	if r.nextTraces != nil {
		for _, td := range all {
			if err := r.nextTraces.ConsumeTraces(ctx, td); err != nil {
				return err
			}
		}
	}
	r.mu.Lock()
	r.emitMetrics(ctx)
	r.mu.Unlock()
	return nil
}

// pollRAS asks NCCL's RAS service for the job's status and reports problems
// that persisted across two polls (a rank briefly behind is normal).
func (r *ncclReceiver) pollRAS(ctx context.Context, c *ras.Client, previous []ras.Finding) []ras.Finding {
	st, err := c.Status(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			r.badInput(ctx, semconv.NCCLSourceRAS)
			r.warnOnce("ras", "ncclflightreceiver: RAS status unavailable, retrying every interval", zap.String("endpoint", r.cfg.RAS.Endpoint), zap.Error(err))
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
		r.state.Findings[key] = unixNow(r.now)
		ranks := make([]any, len(f.Ranks))
		for i, rk := range f.Ranks {
			ranks[i] = int64(rk.Rank)
		}
		problems = append(problems, problem{source: semconv.NCCLSourceRAS, kind: string(f.Kind), key: key, message: f.Message,
			severity: plog.SeverityNumberError,
			attrs:    map[string]any{semconv.AttrNCCLCommID: f.Communicator, semconv.AttrNCCLRanks: ranks}})
	}
	r.consumeLogs(ctx, problems)
	return current
}

// consumeTraces hands spans on; the caller holds r.mu.
func (r *ncclReceiver) consumeTraces(ctx context.Context, td ptrace.Traces) {
	if r.nextTraces == nil || td.SpanCount() == 0 {
		return
	}
	if err := r.nextTraces.ConsumeTraces(ctx, td); err != nil {
		r.logger.Error("ncclflightreceiver: spans refused by the traces pipeline", zap.Int("spans", td.SpanCount()), zap.Error(err))
	}
}

func (r *ncclReceiver) consumeLogs(ctx context.Context, problems []problem) {
	if r.nextLogs == nil || len(problems) == 0 {
		return
	}
	ld := problemLogs(problems, r.host, r.cfg.JobID, r.set.BuildInfo.Version, r.now())
	if err := r.nextLogs.ConsumeLogs(ctx, ld); err != nil {
		r.logger.Error("ncclflightreceiver: findings refused by the logs pipeline", zap.Int("findings", len(problems)), zap.Error(err))
	}
}

func (r *ncclReceiver) emitMetrics(ctx context.Context) {
	if r.nextMetrics == nil {
		return
	}
	md, changed := r.metrics.build(r.host, r.cfg.JobID, r.set.BuildInfo.Version, r.now())
	if !changed {
		return
	}
	if err := r.nextMetrics.ConsumeMetrics(ctx, md); err != nil {
		r.logger.Error("ncclflightreceiver: metrics refused", zap.Error(err))
	}
}
