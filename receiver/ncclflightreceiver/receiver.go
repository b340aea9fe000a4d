package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
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
	"github.com/otelcol-gpu/otelcol-gpu/internal/safefile"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
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
	// jobPath: where a dump's job and attempt are in its path.
	jobPath jobPath

	nextTraces  consumer.Traces
	nextMetrics consumer.Metrics
	nextLogs    consumer.Logs

	storage storage.Client

	mu      sync.Mutex // everything below: the inputs run in their own goroutines
	state   *persistedState
	latest  map[string]map[int]*frdump.Dump // directory → rank → newest dump
	jobs    map[string]jobRef               // directory → the job its dumps belong to
	pending map[string]map[int64]*pendingEntry
	metrics *collectiveMetrics
	warned  map[string]bool // log-once keys

	// rejects logs refused inputs past the collector's log sampling.
	rejects *rejections
	// refused: dumps whose spans the traces pipeline refused (the memory
	// limiter), read again on every retry until accepted.
	refused map[string]watch.File
	// reanalyze: directories whose findings the logs pipeline refused.
	reanalyze map[string]bool
	// patternsChecked: dump directories known to hold a file that matches
	// flight_recorder::patterns, or already reported to hold none that does.
	patternsChecked map[string]bool
	// summaryEvery is the interval of the summary of refused inputs.
	summaryEvery time.Duration
	// inspectorStats: the tailer's counts at the last poll (the inspector
	// goroutine only).
	inspectorStats inspector.Stats

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newNCCLReceiver(cfg *Config, set receiver.Settings) (*ncclReceiver, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	host, _ := hostname.Resolve(cfg.HostName) // "" when unknown, as before
	jp, err := parseJobPath(cfg.FlightRecorder.JobPath)
	if err != nil { // Validate refused it already; a config built in code may not have been validated
		return nil, fmt.Errorf("ncclflightreceiver: flight_recorder::job_path: %q %w", cfg.FlightRecorder.JobPath, err)
	}
	return &ncclReceiver{
		jobPath: jp,
		cfg:     cfg,
		set:     set,
		logger:  set.Logger,
		tb:      tb,
		host:    host,
		now:     time.Now,
		storage: storage.NewNopClient(),
		state:   newPersistedState(),
		latest:  map[string]map[int]*frdump.Dump{},
		jobs:    map[string]jobRef{},
		pending: map[string]map[int64]*pendingEntry{},
		metrics: newCollectiveMetrics(time.Now()),
		warned:  map[string]bool{},

		rejects:         newRejections(set.Logger),
		refused:         map[string]watch.File{},
		reanalyze:       map[string]bool{},
		patternsChecked: map[string]bool{},
		summaryEvery:    time.Minute,
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
	r.poisonInterrupted(ctx)

	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.run(func() { r.every(runCtx, r.summaryEvery, func(context.Context) { r.rejects.summarize() }) })
	r.run(func() { r.every(runCtx, r.cfg.FlightRecorder.RescanInterval, r.retry) })
	if fr := r.cfg.FlightRecorder; len(fr.Directories) > 0 {
		w := watch.New(watch.Options{Dirs: fr.Directories, Patterns: fr.Patterns, Rescan: fr.RescanInterval, Settle: fr.SettleTime,
			Depth:   r.jobPath.depth(),
			Refused: func(path string, err error) { r.refuseInput(runCtx, semconv.NCCLSourceFlightRecorder, path, err) }}, r.logger)
		r.run(func() { _ = w.Run(runCtx, func(files []watch.File) { r.readDumps(runCtx, files) }) })
		r.run(func() { r.every(runCtx, fr.IncompleteAfter/4, r.flushIncomplete) })
	}
	if len(r.cfg.Inspector.Directories) > 0 {
		t := inspector.NewTailer(r.logger, inspector.Options{
			Refused: func(path string, err error) { r.refuseInput(runCtx, semconv.NCCLSourceInspector, path, err) }})
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
	r.rejects.summarize() // the refusals since the last summary
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

// refuseInput counts and logs an input file refused without being read: a
// symlink or not a regular file (safefile). The watcher and the tailer
// report a name once until it changes, so this logs every time.
func (r *ncclReceiver) refuseInput(ctx context.Context, input, path string, err error) {
	reason := safefile.Reason(err)
	r.tb.NcclflightBadInputs.Add(ctx, 1, metric.WithAttributes(
		attribute.String(metadata.TelemetryAttrInput, input), attribute.String(metadata.TelemetryAttrReason, reason)))
	r.rejects.add(input, reason, path, "refusing input file that is a symlink or not a regular file", zap.String("path", path), zap.Error(err))
}

// reject counts a refused input under its reason and logs it so that log
// sampling cannot hide it (rejections): name is the file, directory or
// endpoint, what says what happened.
func (r *ncclReceiver) reject(ctx context.Context, input, reason, name, what string, fields ...zap.Field) {
	r.tb.NcclflightBadInputs.Add(ctx, 1, metric.WithAttributes(
		attribute.String(metadata.TelemetryAttrInput, input), attribute.String(metadata.TelemetryAttrReason, reason)))
	r.rejects.add(input, reason, name, what, fields...)
}

// poisonInterrupted poisons the dump a previous run started decoding and
// never finished (it died decoding it): that version is counted, logged and
// not read again, so that a dump that crashes the collector cannot do it on
// every restart.
func (r *ncclReceiver) poisonInterrupted(ctx context.Context) {
	m, err := loadDecoding(ctx, r.storage)
	if err != nil {
		r.logger.Warn("ncclflightreceiver: state", zap.Error(err))
	}
	if m == nil && err == nil {
		return
	}
	if m != nil {
		r.state.Poisoned[m.Path] = readVersion{Key: m.Key, At: m.At}
		r.reject(ctx, semconv.NCCLSourceFlightRecorder, reasonPoisoned, m.Path,
			"the previous run stopped while decoding this dump; not reading this version of it again (a new version is read)",
			zap.String("path", m.Path))
		if err := saveState(ctx, r.storage, r.state); err != nil {
			r.logger.Warn("ncclflightreceiver: cannot save state", zap.Error(err))
		}
	}
	if err := clearDecoding(ctx, r.storage); err != nil {
		r.logger.Warn("ncclflightreceiver: state", zap.Error(err))
	}
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
	for _, f := range files {
		delete(r.refused, f.Path) // a newer version than the one refused
	}
	r.readBatch(ctx, files)
}

// readBatch reads files and emits what they add. What reading them changes
// (which versions were read, each rank's progress, the metrics) is kept
// aside and committed only once the traces pipeline accepted the spans: a
// refusal (the memory limiter) leaves the dumps to be read again by retry.
// Dumps refused as bad input are recorded at once. The caller holds r.mu.
func (r *ncclReceiver) readBatch(ctx context.Context, files []watch.File) {
	td := ptrace.NewTraces()
	tx := newEmission()
	var dirs []string
	var decoded []watch.File
	read := false
	for _, f := range files {
		dir, analyzable, ok := r.readDump(ctx, td, tx, f)
		read = read || ok
		if _, done := tx.dumps[f.Path]; done {
			decoded = append(decoded, f)
		}
		if analyzable && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool { return rs.ScopeSpans().At(0).Spans().Len() == 0 })
	if err := r.consumeTraces(ctx, td); err != nil {
		for _, f := range decoded {
			r.refused[f.Path] = f
		}
		r.logger.Warn(fmt.Sprintf("ncclflightreceiver: the traces pipeline refused the spans of %d dumps; reading them again every %s until accepted",
			len(decoded), r.cfg.FlightRecorder.RescanInterval), zap.Int("spans", td.SpanCount()), zap.Error(err))
		if read && len(decoded) < len(files) { // bad inputs were recorded
			r.save(ctx)
		}
		return
	}
	for _, f := range decoded {
		delete(r.refused, f.Path)
	}
	r.commit(tx)
	for _, dir := range dirs {
		r.analyze(ctx, dir)
	}
	if !read {
		return
	}
	r.emitMetrics(ctx)
	r.save(ctx)
}

func (r *ncclReceiver) save(ctx context.Context) {
	if err := saveState(ctx, r.storage, r.state); err != nil {
		r.warnOnce("save", "ncclflightreceiver: cannot save state; a restart may emit some spans again", zap.Error(err))
	}
}

// emission is what reading a batch of dumps changes, applied (commit) once
// the traces pipeline accepted the batch's spans.
type emission struct {
	dumps   map[string]readVersion             // versions read
	ranks   map[string]*rankProgress           // copies of the ranks' progress
	pending map[string]map[int64]*pendingEntry // copies of the ranks' pending entries
	latest  map[string]map[int]*frdump.Dump    // directory → rank → newest dump
	jobs    map[string]jobRef                  // directory → its job
	record  []func()                           // metric updates
}

func newEmission() *emission {
	return &emission{dumps: map[string]readVersion{}, ranks: map[string]*rankProgress{},
		pending: map[string]map[int64]*pendingEntry{}, latest: map[string]map[int]*frdump.Dump{},
		jobs: map[string]jobRef{}}
}

// rank returns the batch's copy of a rank's progress and pending entries.
func (tx *emission) rank(r *ncclReceiver, key string) (*rankProgress, map[int64]*pendingEntry) {
	p, ok := tx.ranks[key]
	if !ok {
		p = &rankProgress{Watermark: -1}
		if cur := r.state.Ranks[key]; cur != nil {
			p = cur.clone()
		}
		tx.ranks[key] = p
		tx.pending[key] = maps.Clone(r.pending[key])
		if tx.pending[key] == nil {
			tx.pending[key] = map[int64]*pendingEntry{}
		}
	}
	return p, tx.pending[key]
}

// commit applies what the batch changed; the caller holds r.mu.
func (r *ncclReceiver) commit(tx *emission) {
	maps.Copy(r.state.Dumps, tx.dumps)
	maps.Copy(r.state.Ranks, tx.ranks)
	maps.Copy(r.pending, tx.pending)
	maps.Copy(r.jobs, tx.jobs)
	for dir, ranks := range tx.latest {
		if r.latest[dir] == nil {
			r.latest[dir] = map[int]*frdump.Dump{}
		}
		maps.Copy(r.latest[dir], ranks)
	}
	for _, fn := range tx.record {
		fn()
	}
}

// decoding records in storage, before a dump is decoded, which one it is:
// a run that dies decoding it leaves the record, and the next run poisons
// that version instead of decoding it again (poisonInterrupted). The
// returned function clears the record. Neither follows ctx: a shutdown
// during decoding must not leave a record that poisons an innocent dump.
func (r *ncclReceiver) decoding(ctx context.Context, f watch.File) func() {
	ctx = context.WithoutCancel(ctx)
	if err := markDecoding(ctx, r.storage, decodingMark{Path: f.Path, Key: f.Key(), At: unixNow(r.now)}); err != nil {
		r.warnOnce("mark", "ncclflightreceiver: cannot record the dump being decoded; a dump that crashes the collector would be decoded again after a restart", zap.Error(err))
	}
	return func() {
		if err := clearDecoding(ctx, r.storage); err != nil {
			r.warnOnce("unmark", "ncclflightreceiver: cannot clear the record of the dump being decoded; the next start will skip that dump", zap.Error(err))
		}
	}
}

// readDump decodes one dump and appends its new operations to td, keeping
// what that changes in tx. It reports the dump's directory, whether the dump
// joined that directory's cross-rank analysis (its rank is known), and
// whether the state changed.
func (r *ncclReceiver) readDump(ctx context.Context, td ptrace.Traces, tx *emission, f watch.File) (dir string, analyzable, changed bool) {
	key := f.Key()
	if r.state.Dumps[f.Path].Key == key {
		return "", false, false // read before a restart
	}
	if r.state.Poisoned[f.Path].Key == key {
		r.logger.Debug("ncclflightreceiver: skipping a dump the previous run died decoding", zap.String("path", f.Path))
		return "", false, false
	}
	delete(r.state.Poisoned, f.Path) // a new version is read
	// The job first: a dump whose path names no valid job is not decoded.
	ref, err := r.jobPath.resolve(r.rootOf(f.Path), f.Path, r.cfg.JobID)
	if err != nil {
		r.state.Dumps[f.Path] = readVersion{Key: key, At: unixNow(r.now)}
		r.reject(ctx, semconv.NCCLSourceFlightRecorder, reasonBadJobPath, f.Path,
			"the dump's directories name no valid job and attempt (flight_recorder::job_path), skipping it", zap.String("path", f.Path), zap.Error(err))
		return "", false, true
	}
	defer r.decoding(ctx, f)()
	data, err := watch.ReadFile(f.Path, r.cfg.FlightRecorder.MaxFileSize)
	if safefile.Reason(err) != "" { // swapped for a symlink or FIFO since the watcher saw it
		r.state.Dumps[f.Path] = readVersion{Key: key, At: unixNow(r.now)}
		r.refuseInput(ctx, semconv.NCCLSourceFlightRecorder, f.Path, err)
		return "", false, true
	}
	if err != nil {
		r.state.Dumps[f.Path] = readVersion{Key: key, At: unixNow(r.now)}
		reason := reasonUnreadable
		if errors.Is(err, watch.ErrTooLarge) {
			reason = reasonTooLarge
		}
		r.reject(ctx, semconv.NCCLSourceFlightRecorder, reason, f.Path, "cannot read dump, skipping it", zap.String("path", f.Path), zap.Error(err))
		return "", false, true
	}
	dump, warnings, err := frdump.Parse(data)
	if err != nil {
		r.state.Dumps[f.Path] = readVersion{Key: key, At: unixNow(r.now)}
		reason := reasonUndecodable
		switch {
		case errors.Is(err, pickle.ErrLimit), errors.Is(err, frdump.ErrLimit):
			reason = reasonOverBudget
		case errors.Is(err, frdump.ErrTooLarge):
			reason = reasonTooLarge
		}
		r.reject(ctx, semconv.NCCLSourceFlightRecorder, reason, f.Path, "cannot decode dump, skipping it", zap.String("path", f.Path), zap.Error(err))
		return "", false, true
	}
	for _, w := range warnings {
		r.warnOnce(string(w.Kind)+":"+dump.Version.Raw, "ncclflightreceiver: dump parsed with a warning",
			zap.String("path", f.Path), zap.String("warning", w.Message))
	}
	tx.dumps[f.Path] = readVersion{Key: key, At: unixNow(r.now)}
	if !f.ModTime.IsZero() {
		dump.DumpedAtNs = f.ModTime.UnixNano() // the analysis tells stopped ranks by it
	}
	r.tb.NcclflightDumpsRead.Add(ctx, 1)
	dir = filepath.Dir(f.Path)
	rank := r.rankOf(f.Path)
	res := rankResource{host: r.host, job: ref.job, attempt: ref.attempt, hasAttempt: ref.fromPath, rank: rank, worldSize: worldSize(dump)}
	tx.jobs[dir] = ref
	r.emitEntries(tx, appendRankSpans(td, res, r.set.BuildInfo.Version), dir, res, dump)
	if rank < 0 {
		return dir, false, true
	}
	if tx.latest[dir] == nil {
		tx.latest[dir] = map[int]*frdump.Dump{}
	}
	tx.latest[dir][rank] = dump
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
// when incomplete_after passes without one. Progress changes in tx.
func (r *ncclReceiver) emitEntries(tx *emission, spans ptrace.SpanSlice, dir string, res rankResource, dump *frdump.Dump) {
	rankKey := dir + "/" + strconv.Itoa(res.rank)
	progress, pending := tx.rank(r, rankKey)
	pendingIDs := map[int64]bool{}
	for _, id := range progress.Pending {
		pendingIDs[id] = true
	}
	now := r.now()
	for i := range dump.Entries {
		e := &dump.Entries[i]
		if e.RecordID <= progress.Watermark && !pendingIDs[e.RecordID] {
			continue // emitted from an earlier dump
		}
		if e.State == frdump.StateCompleted || e.TimedOut() {
			entrySpan(spans.AppendEmpty(), res, e)
			tx.record = append(tx.record, func() { r.recordEntry(res, e) })
			delete(pendingIDs, e.RecordID)
			delete(pending, e.RecordID)
		} else {
			pendingIDs[e.RecordID] = true
			if p := pending[e.RecordID]; p != nil {
				pending[e.RecordID] = &pendingEntry{entry: *e, res: p.res, since: p.since} // a copy: p is committed state
			} else {
				pending[e.RecordID] = &pendingEntry{entry: *e, res: res, since: now}
			}
		}
		progress.Watermark = max(progress.Watermark, e.RecordID)
	}
	progress.Pending = sortedIDs(pendingIDs)
}

// recordEntry adds an emitted operation to the metrics.
func (r *ncclReceiver) recordEntry(res rankResource, e *frdump.Entry) {
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
		sort.Slice(due, func(i, j int) bool { return due[i].entry.RecordID < due[j].entry.RecordID })
		td, spans := newRankTraces(due[0].res, r.set.BuildInfo.Version)
		for _, p := range due {
			entrySpan(spans.AppendEmpty(), p.res, &p.entry)
		}
		if err := r.consumeTraces(ctx, td); err != nil {
			r.logger.Warn(fmt.Sprintf("ncclflightreceiver: the traces pipeline refused the spans of %d operations not completed; emitting them again at the next flush",
				len(due)), zap.String("rank", rankKey), zap.Error(err))
			continue // still pending
		}
		progress := r.state.rank(rankKey)
		remaining := map[int64]bool{}
		for _, id := range progress.Pending {
			remaining[id] = true
		}
		for _, p := range due {
			r.recordEntry(p.res, &p.entry)
			delete(entries, p.entry.RecordID)
			delete(remaining, p.entry.RecordID)
		}
		progress.Pending = sortedIDs(remaining)
		flushed = true
	}
	if flushed {
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

// analyze runs the cross-rank analysis over the newest dump of every rank
// in dir and reports findings not reported before.
func (r *ncclReceiver) analyze(ctx context.Context, dir string) {
	ranks := r.latest[dir]
	dumps := make([]analysis.RankDump, 0, len(ranks))
	for rank, d := range ranks {
		dumps = append(dumps, analysis.RankDump{Rank: rank, Dump: d})
	}
	sort.Slice(dumps, func(i, j int) bool { return dumps[i].Rank < dumps[j].Rank })
	opts := analysis.DefaultOptions()
	opts.StallAfter = r.cfg.FlightRecorder.StallAfter
	report := analysis.Analyze(dumps, opts)
	ref := r.jobs[dir]
	var problems []problem
	for _, f := range report.Findings {
		key := findingKey(ref, f.Key().String())
		if _, done := r.state.Findings[key]; done {
			continue
		}
		problems = append(problems, analysisProblem(f, key))
	}
	if r.consumeLogs(ctx, problems, ref) != nil {
		r.reanalyze[dir] = true // reported again by retry
		return
	}
	for _, p := range problems {
		r.state.Findings[p.key] = unixNow(r.now)
	}
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

// consumeTraces hands spans on; the caller holds r.mu. An error means the
// spans were refused: the caller keeps what produced them to emit again,
// and says so.
func (r *ncclReceiver) consumeTraces(ctx context.Context, td ptrace.Traces) error {
	if r.nextTraces == nil || td.SpanCount() == 0 {
		return nil
	}
	return r.nextTraces.ConsumeTraces(ctx, td)
}

// consumeLogs hands findings on; an error means they were refused and are
// not recorded as reported.
func (r *ncclReceiver) consumeLogs(ctx context.Context, problems []problem, ref jobRef) error {
	if r.nextLogs == nil || len(problems) == 0 {
		return nil
	}
	ld := problemLogs(problems, r.host, ref.job, r.set.BuildInfo.Version, r.now())
	if ref.fromPath {
		ld.ResourceLogs().At(0).Resource().Attributes().PutInt(semconv.AttrTrainingAttempt, ref.attempt)
	}
	if err := r.nextLogs.ConsumeLogs(ctx, ld); err != nil {
		r.logger.Warn("ncclflightreceiver: findings refused by the logs pipeline; they will be reported again", zap.Int("findings", len(problems)), zap.Error(err))
		return err
	}
	return nil
}

func (r *ncclReceiver) emitMetrics(ctx context.Context) {
	if r.nextMetrics == nil {
		return
	}
	md, changed := r.metrics.build(r.host, r.set.BuildInfo.Version, r.now())
	if !changed {
		return
	}
	if err := r.nextMetrics.ConsumeMetrics(ctx, md); err != nil {
		r.metrics.dirty = true // sent again by the next emission (retry)
		r.logger.Warn("ncclflightreceiver: metrics refused; they will be sent again", zap.Error(err))
	}
}

// retry emits again what a pipeline refused (the spans of refused dumps,
// findings, metrics) and reports dump directories whose files match none of
// the patterns.
func (r *ncclReceiver) retry(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refused) > 0 {
		files := slices.Collect(maps.Values(r.refused))
		sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
		r.readBatch(ctx, files)
	}
	for _, dir := range slices.Sorted(maps.Keys(r.reanalyze)) {
		delete(r.reanalyze, dir)
		r.analyze(ctx, dir)
	}
	r.emitMetrics(ctx)
	r.checkPatterns(ctx)
}

// maxNamesLogged bounds the file names a log line lists.
const maxNamesLogged = 5

// checkPatterns reports, once per directory, a dump directory that holds
// files none of which matches flight_recorder::patterns (a custom
// TORCH_FR_DUMP_TEMP_FILE prefix): without it, nothing would ever be read
// and nothing said. The caller holds r.mu.
func (r *ncclReceiver) checkPatterns(ctx context.Context) {
	fr := r.cfg.FlightRecorder
	for _, dir := range fr.Directories {
		if r.patternsChecked[dir] {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // the watcher reports a directory it cannot list
		}
		var names []string
		for _, e := range entries {
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") { // hidden: a file being written
				continue
			}
			if matchesAny(fr.Patterns, e.Name()) {
				names = nil
				r.patternsChecked[dir] = true
				break
			}
			names = append(names, e.Name())
		}
		if len(names) == 0 {
			continue // dumps are read, or none yet
		}
		r.patternsChecked[dir] = true
		total := len(names)
		names = names[:min(total, maxNamesLogged)]
		r.reject(ctx, semconv.NCCLSourceFlightRecorder, reasonNoPatternMatch, dir,
			fmt.Sprintf("none of the %d files in the dump directory matches flight_recorder::patterns %q (files: %q); set patterns to match the dumps' names (their prefix is TORCH_FR_DUMP_TEMP_FILE)",
				total, fr.Patterns, names),
			zap.String("directory", dir), zap.Strings("files", names), zap.Int("files_total", total), zap.Strings("patterns", fr.Patterns))
	}
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}

// findingKey deduplicates a finding: the same on every node that finds it
// (the gateway drops repeats), so it holds the job, the attempt and the
// analysis' key, and no local path: agents mount the dump directory at
// different paths.
func findingKey(ref jobRef, analysisKey string) string {
	return ref.job + "|" + strconv.FormatInt(ref.attempt, 10) + "|" + analysisKey
}

// rootOf returns the flight_recorder directory a dump was found in: the
// longest one that holds its path.
func (r *ncclReceiver) rootOf(path string) string {
	root := filepath.Dir(path)
	best := -1
	for _, d := range r.cfg.FlightRecorder.Directories {
		c := filepath.Clean(d)
		if (strings.HasPrefix(path, c+string(filepath.Separator)) || c == string(filepath.Separator)) && len(c) > best {
			root, best = c, len(c)
		}
	}
	return root
}
