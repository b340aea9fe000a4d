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
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostname"
	"github.com/otelcol-gpu/otelcol-gpu/internal/safefile"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/ras"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/watch"
)

// trailingDigits is the rank at the end of a dump's name: users put host
// names in the prefix (host-a_nccl_trace_rank_3).
var trailingDigits = regexp.MustCompile(`(\d+)$`)

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
	latest  map[string]map[int]*analysis.Rank // directory → rank → the records of its newest dump
	jobs    map[string]jobRef                 // directory → the job its dumps belong to
	pending map[string]map[int64]*pendingEntry
	metrics *collectiveMetrics
	warned  map[string]bool // log-once keys

	// budget bounds what the flight recorder input holds (budget.go);
	// budgetSource says where its limit came from.
	budget       *memoryBudget
	budgetSource decodeBudgetSource
	// lastRead orders the directories of latest by when a dump of theirs
	// was last read (readSeq), to forget the oldest first (makeRoom).
	lastRead map[string]uint64
	readSeq  uint64
	// lastRefusal is the traces pipeline's latest refusal of a dump's spans.
	lastRefusal error

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
	limit, source := processDecodeBudget(cfg.FlightRecorder.DecodeBudget)
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
		latest:  map[string]map[int]*analysis.Rank{},
		jobs:    map[string]jobRef{},
		pending: map[string]map[int64]*pendingEntry{},
		metrics: newCollectiveMetrics(time.Now()),
		warned:  map[string]bool{},

		rejects:         newRejections(set.Logger),
		refused:         map[string]watch.File{},
		reanalyze:       map[string]bool{},
		patternsChecked: map[string]bool{},
		summaryEvery:    time.Minute,
		budget:          newMemoryBudget(limit),
		budgetSource:    source,
		lastRead:        map[string]uint64{},
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
		r.logger.Info(fmt.Sprintf("ncclflightreceiver: flight recorder dumps are read within a decode budget of %d MiB (%s)", r.budget.limit>>20, r.budgetSource),
			zap.Int64("decode_budget", r.budget.limit))
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
