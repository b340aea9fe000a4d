package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/safefile"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/watch"
)

// Reading flight recorder dumps under the decode budget (budget.go): one
// dump at a time, each decoded with what the records already kept leave
// free, its entries turned into compact records as they are mapped
// (analysis.Builder) and its spans sent in requests of at most
// spansPerRequest.

const (
	// decodeBytesPerInputByte estimates what decoding a pickle dump holds
	// per byte of it: the input, the records built from it and, streamed
	// as torch's pickler writes it (entries never memoized), one entry at
	// a time and what the memo keeps (0.33 MB for 20,000 entries); a dump
	// whose entries are memoized (Python's pickler) is decoded whole, its
	// tree 8.3 times the input (BENCHMARKS.md). It decides only whether
	// the records of other jobs are forgotten to make room before a dump
	// is decoded; the decode itself is capped by what is free.
	decodeBytesPerInputByte = 4
	// treeShareOfFree is the part of what is free, besides the input's
	// bytes, that a pickle's decoded tree may take (frdump.Options.
	// MaxTreeBytes); the rest is for the records built from it. The tree's
	// count is its heap within treeHeapPercent and the decoder's slabs
	// (TestParseTreeBudget).
	treeShareOfFree = 3.0 / 4
	treeHeapPercent = 105
	treeSlackBytes  = 64 << 10
	// analysisBytesPerOp is what a cross-rank analysis holds at most for
	// each operation of the ranks it compares (the windows and alignments
	// it builds; 49 measured, BenchmarkAnalyzeRanksBytes). An analysis runs
	// after the batch's dumps were decoded, never during: a dump is kept
	// only if the analysis of the largest job then still fits beside the
	// records, and each analysis reserves what it needs while it runs.
	analysisBytesPerOp = 56
)

// readDumps decodes dumps that became complete together and emits what they
// add (readBatch).
func (r *ncclReceiver) readDumps(ctx context.Context, files []watch.File) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range files {
		delete(r.refused, f.Path) // a newer version than the one refused
	}
	r.readBatch(ctx, files)
}

// readBatch reads files one at a time, in order, and emits what each adds:
// the spans of operations not emitted before, each request committed once
// the traces pipeline accepted it (a refusal, the memory limiter, leaves
// the rest of that dump to be read again by retry); then, once for the
// batch, the findings of the cross-rank analysis of each directory whose
// dumps were read, over the newest dump of every rank (a partly rewritten
// directory would compare old and new dumps). Before the first is decoded
// the whole batch is recorded as being decoded, so that a run that dies
// reading it does not read any of it again (poisonInterrupted). The state
// is saved once for the batch. The caller holds r.mu.
func (r *ncclReceiver) readBatch(ctx context.Context, files []watch.File) {
	defer r.decoding(ctx, r.toDecode(files))()
	var dirs []string
	changed, refused := false, 0
	for _, f := range files {
		out := r.readDump(ctx, f)
		changed = changed || out.changed
		if out.refused {
			refused++
		}
		if out.analyzable && !slices.Contains(dirs, out.dir) {
			dirs = append(dirs, out.dir)
		}
	}
	if refused > 0 {
		r.logger.Warn(fmt.Sprintf("ncclflightreceiver: the traces pipeline refused the spans of %d dumps; reading them again every %s until accepted",
			refused, r.cfg.FlightRecorder.RescanInterval), zap.Error(r.lastRefusal))
	}
	for _, dir := range dirs {
		r.analyze(ctx, dir)
	}
	if !changed {
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

// toDecode returns the files of a batch that readDump may decode: not read
// before, not poisoned.
func (r *ncclReceiver) toDecode(files []watch.File) []markedDump {
	var out []markedDump
	for _, f := range files {
		key := f.Key()
		if r.state.Dumps[f.Path].Key != key && r.state.Poisoned[f.Path].Key != key && len(out) < maxRememberedFiles {
			out = append(out, markedDump{Path: f.Path, Key: key})
		}
	}
	return out
}

// decoding records in storage, before a batch is decoded, every dump it
// holds: a run that dies reading the batch leaves the record, and the next
// run poisons those versions instead of reading them again
// (poisonInterrupted). The returned function clears the record. Neither
// follows ctx: a shutdown while reading must not leave a record that
// poisons innocent dumps.
func (r *ncclReceiver) decoding(ctx context.Context, batch []markedDump) func() {
	if len(batch) == 0 {
		return func() {}
	}
	ctx = context.WithoutCancel(ctx)
	if err := markDecoding(ctx, r.storage, decodingMark{Batch: batch, At: unixNow(r.now)}); err != nil {
		r.warnOnce("mark", "ncclflightreceiver: cannot record the dumps being decoded; dumps that crash the collector would be decoded again after a restart", zap.Error(err))
	}
	return func() {
		if err := clearDecoding(ctx, r.storage); err != nil {
			r.warnOnce("unmark", "ncclflightreceiver: cannot clear the record of the dumps being decoded; the next start will skip them", zap.Error(err))
		}
	}
}

// poisonInterrupted poisons the dumps of the batch a previous run started
// reading and never finished (it died reading it; a dump it had read in
// full is not): those versions are counted, logged and not read again, so
// that dumps that crash the collector cannot do it on every restart,
// whichever of them it died on.
func (r *ncclReceiver) poisonInterrupted(ctx context.Context) {
	m, err := loadDecoding(ctx, r.storage)
	if err != nil {
		r.logger.Warn("ncclflightreceiver: state", zap.Error(err))
	}
	if m == nil && err == nil {
		return
	}
	if m != nil {
		for _, d := range m.dumps() {
			if r.state.Dumps[d.Path].Key == d.Key {
				continue // read in full before the run died
			}
			r.state.Poisoned[d.Path] = readVersion{Key: d.Key, At: m.At}
			r.reject(ctx, semconv.NCCLSourceFlightRecorder, reasonPoisoned, d.Path,
				"the previous run stopped while reading the batch of dumps that holds this one; not reading this version of it again (a new version is read)",
				zap.String("path", d.Path), zap.Int("batch", len(m.dumps())))
		}
		if err := saveState(ctx, r.storage, r.state); err != nil {
			r.logger.Warn("ncclflightreceiver: cannot save state", zap.Error(err))
		}
	}
	if err := clearDecoding(ctx, r.storage); err != nil {
		r.logger.Warn("ncclflightreceiver: state", zap.Error(err))
	}
}

// dumpRead is what reading one dump did.
type dumpRead struct {
	dir        string
	analyzable bool // its records joined dir's cross-rank analysis
	changed    bool // the state changed
	refused    bool // the traces pipeline refused its spans: read again by retry
}

// readDump decodes one dump, emits its new operations and keeps its
// records for the cross-rank analysis of its directory (when its rank is
// known).
func (r *ncclReceiver) readDump(ctx context.Context, f watch.File) dumpRead {
	key := f.Key()
	if r.state.Dumps[f.Path].Key == key {
		return dumpRead{} // read before a restart
	}
	if r.state.Poisoned[f.Path].Key == key {
		r.logger.Debug("ncclflightreceiver: skipping a dump the previous run died reading", zap.String("path", f.Path))
		return dumpRead{}
	}
	delete(r.state.Poisoned, f.Path) // a new version is read
	done := func() { r.state.Dumps[f.Path] = readVersion{Key: key, At: unixNow(r.now)} }
	// The job first: a dump whose path names no valid job is not decoded.
	ref, err := r.jobPath.resolve(r.rootOf(f.Path), f.Path, r.cfg.JobID)
	if err != nil {
		done()
		r.reject(ctx, semconv.NCCLSourceFlightRecorder, reasonBadJobPath, f.Path,
			"the dump's directories name no valid job and attempt (flight_recorder::job_path), skipping it", zap.String("path", f.Path), zap.Error(err))
		return dumpRead{changed: true}
	}
	dir, rank := filepath.Dir(f.Path), r.rankOf(f.Path)
	dec, ok := r.decodeDump(ctx, f, dir, rank)
	if !ok {
		done()
		return dumpRead{changed: true}
	}
	for _, w := range dec.warnings {
		r.warnOnce(string(w.Kind)+":"+dec.dump.Version.Raw, "ncclflightreceiver: dump parsed with a warning",
			zap.String("path", f.Path), zap.String("warning", w.Message))
	}
	rk := dec.rank
	rk.Rank = rank
	if !f.ModTime.IsZero() {
		rk.DumpedAtNs = f.ModTime.UnixNano() // the analysis tells stopped ranks by it
	}
	r.tb.NcclflightDumpsRead.Add(ctx, 1)
	r.jobs[dir] = ref
	res := rankResource{host: r.host, job: ref.job, attempt: ref.attempt, hasAttempt: ref.fromPath, rank: rank, worldSize: worldSize(dec.dump.PGConfig)}
	committed, err := r.emitDump(ctx, dir, res, rk)
	r.budget.release(dec.reserved) // what it covered is charged below
	r.syncPending()
	if err != nil {
		r.refused[f.Path] = f
		r.lastRefusal = err
		return dumpRead{changed: committed, refused: true}
	}
	delete(r.refused, f.Path)
	done()
	if rank < 0 {
		return dumpRead{dir: dir, changed: true}
	}
	if r.latest[dir] == nil {
		r.latest[dir] = map[int]*analysis.Rank{}
	}
	rk = keptRecords(r.latest[dir][rank], rk) // keep.go
	r.latest[dir][rank] = rk
	r.budget.set(rankBudgetKey(dir, rank), rankCharge(rk))
	r.readSeq++
	r.lastRead[dir] = r.readSeq
	return dumpRead{dir: dir, analyzable: true, changed: true}
}

func rankBudgetKey(dir string, rank int) string { return dir + "/" + strconv.Itoa(rank) }

// rankCharge is what a rank's records cost while kept.
func rankCharge(rk *analysis.Rank) int64 { return rk.Bytes }

// analysisNeed is what the analysis of the largest job would hold once
// dir's rank has ops operations (-1: dir unchanged).
func (r *ncclReceiver) analysisNeed(dir string, rank, ops int) int64 {
	most := 0
	for d, ranks := range r.latest {
		n := 0
		for rk, records := range ranks {
			if d != dir || rk != rank || ops < 0 {
				n += len(records.Ops)
			}
		}
		most = max(most, n)
	}
	if ops >= 0 {
		n := ops
		for rk, records := range r.latest[dir] {
			if rk != rank {
				n += len(records.Ops)
			}
		}
		most = max(most, n)
	}
	return int64(most) * analysisBytesPerOp
}

// decodedDump is a dump read under the budget.
type decodedDump struct {
	rank     *analysis.Rank
	dump     *frdump.Dump // without its entries: they are in rank
	warnings []frdump.Warning
	// reserved is what stays reserved until the dump's operations are
	// emitted and its records kept: the records, their analysis and the
	// operations that may wait as pending.
	reserved int64
}

// decodeDump reads and decodes one dump with what the decode budget has
// free, refusing it (counted, logged) when it cannot be read or decoded or
// does not fit: its records, its operations that may wait as pending and
// the analysis of the largest job must fit beside what is kept.
func (r *ncclReceiver) decodeDump(ctx context.Context, f watch.File, dir string, rank int) (*decodedDump, bool) {
	refuse := func(reason, what string, err error) (*decodedDump, bool) {
		fields := []zap.Field{zap.String("path", f.Path)}
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		r.reject(ctx, semconv.NCCLSourceFlightRecorder, reason, f.Path, what, fields...)
		return nil, false
	}
	overBudget := func(err error) (*decodedDump, bool) {
		return refuse(reasonOverDecodeBudget, fmt.Sprintf("the dump needs more memory than the decode budget has free (flight_recorder::decode_budget %d MiB, %s; %d MiB held by the records of %d ranks); skipping it, its job is analysed without it",
			r.budget.limit>>20, r.budgetSource, r.budget.total>>20, r.keptRanks()), err)
	}
	if f.Size > r.cfg.FlightRecorder.MaxFileSize { // the per-file cap first: it is the dump's fault, not the node's
		return refuse(reasonTooLarge, "cannot read dump, skipping it", fmt.Errorf("%w: %d bytes, flight_recorder::max_file_size %d", watch.ErrTooLarge, f.Size, r.cfg.FlightRecorder.MaxFileSize))
	}
	r.makeRoom(dir, func() int64 {
		// What decoding it needs, and what its records and the analysis
		// of its job will need beside what is kept (analysisNeed: a
		// torch pickle holds an entry in some 185 bytes).
		size := max(f.Size, 0)
		return max(size*decodeBytesPerInputByte, size/2+r.analysisNeed(dir, rank, int(size/128)))
	})
	avail := r.budget.free()
	if f.Size >= avail {
		return overBudget(nil)
	}
	r.budget.reserve(avail)
	keep := int64(0)
	defer func() { r.budget.release(avail - keep) }()

	data, err := watch.ReadFile(f.Path, min(r.cfg.FlightRecorder.MaxFileSize, avail-1))
	if safefile.Reason(err) != "" { // swapped for a symlink or FIFO since the watcher saw it
		r.refuseInput(ctx, semconv.NCCLSourceFlightRecorder, f.Path, err)
		return nil, false
	}
	switch {
	case errors.Is(err, watch.ErrTooLarge) && r.cfg.FlightRecorder.MaxFileSize >= avail && !r.overMaxFileSize(f.Path):
		return overBudget(nil) // grown since it settled, past what is free
	case errors.Is(err, watch.ErrTooLarge):
		return refuse(reasonTooLarge, "cannot read dump, skipping it", err)
	case errors.Is(err, fs.ErrNotExist):
		// Renamed or removed since the directory was listed (a writer's
		// temporary name moved into place): not a bad input; the next
		// scan sees it under its new name.
		r.logger.Debug("ncclflightreceiver: dump gone before it was read", zap.String("path", f.Path))
		return nil, false
	case err != nil:
		return refuse(reasonUnreadable, "cannot read dump, skipping it", err)
	}
	share := avail - int64(len(data))
	b := analysis.NewBuilder(-1, 0)
	b.Limit = share - int64(float64(share)*treeShareOfFree)
	d, warnings, err := frdump.ParseWithOptions(data, frdump.Options{
		MaxTreeBytes: max(int64(float64(share)*treeShareOfFree)-treeSlackBytes, 1) * 100 / treeHeapPercent,
		Entry: func(i, n int, e *frdump.Entry) error {
			if i == 0 && n > 0 {
				if err := b.Grow(n); err != nil {
					return err
				}
			}
			return b.Add(e)
		},
	})
	var rk *analysis.Rank
	if err == nil {
		rk, err = b.Finish(d)
	}
	if err == nil {
		keep = rankCharge(rk) + int64(rk.Incomplete)*pendingEntryBytes
		held := r.budget.total - r.budget.held[rankBudgetKey(dir, rank)] + keep
		if rank < 0 {
			held = r.budget.total + keep // not kept: only its pending operations stay
		}
		if need := r.analysisNeed(dir, rank, len(rk.Ops)); keep > avail || held+need > r.budget.limit {
			err = fmt.Errorf("%w: its records and operations not completed (%d bytes) and the analysis of the largest job (%d bytes) would not fit beside the %d bytes kept",
				analysis.ErrRankBudget, keep, need, r.budget.total)
			keep = 0
		}
	}
	switch {
	case err == nil:
		return &decodedDump{rank: rk, dump: d, warnings: warnings, reserved: keep}, true
	case errors.Is(err, pickle.ErrTreeLimit), errors.Is(err, analysis.ErrRankBudget):
		return overBudget(err)
	case errors.Is(err, pickle.ErrLimit), errors.Is(err, frdump.ErrLimit):
		return refuse(reasonOverBudget, "cannot decode dump, skipping it", err)
	case errors.Is(err, frdump.ErrTooLarge):
		return refuse(reasonTooLarge, "cannot decode dump, skipping it", err)
	}
	return refuse(reasonUndecodable, "cannot decode dump, skipping it", err)
}

// overMaxFileSize reports whether the file at path is over
// flight_recorder::max_file_size now.
func (r *ncclReceiver) overMaxFileSize(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.Size() > r.cfg.FlightRecorder.MaxFileSize
}

// keptRanks counts the ranks whose records are kept.
func (r *ncclReceiver) keptRanks() int {
	n := 0
	for _, ranks := range r.latest {
		n += len(ranks)
	}
	return n
}

// makeRoom forgets the records of other directories (jobs), those read
// least recently first, until need() bytes are free or none is left: a
// job that ended must not keep the budget from the ones running. A job
// whose records were forgotten is analysed again from its next dumps.
func (r *ncclReceiver) makeRoom(dir string, need func() int64) {
	for r.budget.free() < need() {
		victim, oldest := "", uint64(0)
		for d := range r.latest {
			if d != dir && (victim == "" || r.lastRead[d] < oldest) {
				victim, oldest = d, r.lastRead[d]
			}
		}
		if victim == "" {
			return
		}
		for rank := range r.latest[victim] {
			r.budget.set(rankBudgetKey(victim, rank), 0)
		}
		r.logger.Info("ncclflightreceiver: forgetting the analysis records of a dump directory read least recently, to make room in the decode budget",
			zap.String("directory", victim), zap.Int("ranks", len(r.latest[victim])), zap.String("for", dir))
		delete(r.latest, victim)
		delete(r.lastRead, victim)
	}
}

// worldSize is the size of the default process group, else of the largest.
func worldSize(pgs map[string]frdump.PGConfig) int {
	n := 0
	for _, pg := range pgs {
		if pg.Desc == "default_pg" {
			return len(pg.Ranks)
		}
		n = max(n, len(pg.Ranks))
	}
	return n
}

// analyze runs the cross-rank analysis over the newest dump of every rank
// in dir and reports findings not reported before.
func (r *ncclReceiver) analyze(ctx context.Context, dir string) {
	ranks := slices.Collect(maps.Values(r.latest[dir]))
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].Rank < ranks[j].Rank })
	// Kept dumps were admitted with room for this; a reservation that
	// fails would be a bug in that accounting, said loudly, not a reason
	// to leave the job unanalysed.
	need := r.analysisNeed(dir, 0, -1)
	if !r.budget.reserve(need) {
		r.logger.Error("ncclflightreceiver: the decode budget has no room for the analysis of a job whose dumps it admitted; analysing it anyway",
			zap.String("directory", dir), zap.Int64("need", need), zap.Int64("free", r.budget.free()))
		need = 0
	}
	defer r.budget.release(need)
	opts := analysis.DefaultOptions()
	opts.StallAfter = r.cfg.FlightRecorder.StallAfter
	report := analysis.AnalyzeRanks(ranks, opts)
	ref := r.jobs[dir]
	var problems []problem
	for _, f := range report.Findings {
		key := findingKey(ref, reportKey(&f))
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

// reportKey is what a finding is reported once per. A hang's culprits
// are part of it: ranks dump at different moments, and an analysis made
// before a culprit's dump arrived names fewer culprits than a later one of
// the same stuck collective; the later one must still be reported (a
// 16-rank GIL-lock incident lost rank 9 when its dump, written last, came
// after the first analysis).
func reportKey(f *analysis.Finding) string {
	key := f.Key().String()
	if f.Kind != analysis.KindHang || len(f.Ranks) == 0 {
		return key
	}
	ranks := make([]string, len(f.Ranks))
	for i, r := range slices.Sorted(slices.Values(f.Ranks)) {
		ranks[i] = strconv.Itoa(r)
	}
	return key + "|culprits=" + strings.Join(ranks, ",")
}
