// Package analysis compares the flight recorder dumps of several ranks of one
// job (the local ranks of a node, or every rank when a whole job dumps into one
// shared directory) and reports what a single rank's dump cannot show: ranks
// that never joined a collective the others started (a hang), collectives that
// differ across ranks (a desync), pg_status divergence (who is behind), the
// straggler that makes everyone wait, and timed-out operations; across all
// process groups, the ranks a hang waits for (culprit.go), with the
// per-group findings it explains folded into that one finding.
//
// How the dumps are lined up:
//   - Ring buffers wrap, so ranks hold different windows. As PyTorch's fr_trace
//     does, entries older than the largest first record_id across ranks are
//     dropped first; then, per process group, collectives older than the first
//     collective_seq_id that every rank still holds are ignored.
//   - Collectives are aligned per process group (by its name, the first element
//     of the process_group tuple, which all ranks share) by collective_seq_id.
//   - Point-to-point entries are left out of the alignment: their p2p_seq_id
//     counts this rank's own sends and receives, so it does not line up across
//     ranks, and their collective_seq_id repeats the last collective's. They
//     only take part in the timeout check.
//
// Analyze is a pure function: it does not log, keeps no state and never
// panics on any input.
package analysis // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"

import (
	"fmt"
	"sort"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// RankDump is the dump of one rank.
type RankDump struct {
	Rank int
	Dump *frdump.Dump
}

// Kind is what a Finding is about.
type Kind string

const (
	// KindMissingRanks: some ranks never enqueued a collective the others
	// started and did not complete — the signature of a hang.
	KindMissingRanks Kind = semconv.NCCLFindingMissingRanks
	// KindMismatch: the same collective differs across ranks (type, sizes,
	// dtypes) — a desync.
	KindMismatch Kind = "mismatch"
	// KindStraggler: one rank enqueues last and waits least in most
	// collectives: everyone else waits for it.
	KindStraggler Kind = semconv.NCCLFindingStraggler
	// KindPGStatusDivergence: ranks disagree on the last collective they
	// enqueued in a process group; the ones behind are named.
	KindPGStatusDivergence Kind = "pg_status_divergence"
	// KindTimeout: the watchdog retired an operation that never completed.
	KindTimeout Kind = "timeout"
	// KindHang: ranks that stopped, which every stuck process group of the
	// job waits for (culprit.go); one finding per incident, across groups.
	KindHang Kind = semconv.NCCLFindingHang
)

// Finding is one problem found across ranks.
type Finding struct {
	Kind Kind
	// PGID is the process group id (pg_id); -1 when unknown.
	PGID           int64
	PGName, PGDesc string
	// Seq is the collective_seq_id the finding is about (the p2p_seq_id when
	// P2P). For a straggler it is the last collective of the window scored;
	// for a pg_status divergence, the first collective the ranks behind never
	// enqueued.
	Seq int64
	P2P bool
	// ProfilingName is the collective, e.g. nccl:all_reduce; empty when the
	// finding spans many collectives.
	ProfilingName string
	// Ranks are the ranks to look at: missing (hang), behind (divergence),
	// the straggler, the culprits of a mismatch, or those that timed out.
	Ranks []int
	// Message is multi-line text worded like PyTorch's fr_trace analyzer.
	Message string
	// Evidence holds the numbers behind the finding, e.g.
	// "rank.2.last_enqueued_collective" → "16".
	Evidence map[string]string
	// Stuck is, for a hang, the collective the culprits (Ranks) never
	// entered and the job is stuck in (hang.go); nil for other kinds.
	Stuck *StuckCollective
	// Folded are, for a hang, the per-group findings it explains
	// (missing_ranks, pg_status_divergence), sorted like Report.Findings;
	// they are not in Report.Findings themselves.
	Folded []Finding
}

// FindingKey identifies a finding across repeated analyses of the same job,
// so that re-reading dumps does not report the same problem twice.
type FindingKey struct {
	PGName string
	P2P    bool
	Seq    int64
	Kind   Kind
}

// String renders the key, e.g. "pg=0/coll:17/missing_ranks".
func (k FindingKey) String() string {
	space := "coll"
	if k.P2P {
		space = "p2p"
	}
	return fmt.Sprintf("pg=%s/%s:%d/%s", k.PGName, space, k.Seq, k.Kind)
}

// Key is the finding's deduplication key: (process group, sequence, kind).
func (f *Finding) Key() FindingKey {
	return FindingKey{PGName: f.PGName, P2P: f.P2P, Seq: f.Seq, Kind: f.Kind}
}

// Report is the outcome of one analysis.
type Report struct {
	// Findings: the hang first when there is one (Headline), then the
	// others sorted by process group, sequence and kind.
	Findings []Finding
	// Ranks analysed, ascending (nil dumps and duplicates dropped).
	Ranks []int
	// WindowStartRecordID is the largest first record_id across ranks: older
	// entries were dropped before aligning.
	WindowStartRecordID int64
}

// Options tunes the checks. A zero or negative field takes its default (see
// DefaultOptions).
type Options struct {
	// StragglerMinShare is the share of scored collectives in which one rank
	// must be the last to enqueue (and, when durations are recorded, have the
	// shortest duration). Default 0.6.
	StragglerMinShare float64
	// StragglerMinLag is the smallest mean enqueue lag, behind the median
	// rank, that can make a straggler. Default 1ms.
	StragglerMinLag time.Duration
	// StragglerLagFactor: the straggler's mean lag must also be at least this
	// many times the mean spread of the other ranks' enqueue offsets, so that
	// ordinary jitter never names one. Default 2.
	StragglerLagFactor float64
	// StragglerMinCollectives is the fewest scored collectives a straggler
	// verdict needs. Default 16: a rank that stalls for one step (a
	// data-loader hiccup: four or five collectives enqueued last) in a short
	// window, or the first dumps of a job, must not name a straggler; a real
	// dump every 50-100 steps holds hundreds.
	StragglerMinCollectives int
	// StragglerMinRanks is the fewest ranks a straggler verdict needs: with two
	// ranks one of them is always last. Default 3.
	StragglerMinRanks int
	// MinStatusGap is the smallest difference in last enqueued collective
	// between ranks that is reported as a pg_status divergence. Default 1.
	MinStatusGap int64
	// StallAfter is how long before its dump a rank must have enqueued
	// nothing to count as stopped (culprit.go); a rank that enqueued more
	// recently was running, and what it lacks it had not reached yet.
	// Default 1m.
	StallAfter time.Duration
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		StragglerMinShare:       0.6,
		StragglerMinLag:         time.Millisecond,
		StragglerLagFactor:      2,
		StragglerMinCollectives: 16,
		StragglerMinRanks:       3,
		MinStatusGap:            1,
		StallAfter:              time.Minute,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if !(o.StragglerMinShare > 0) { // also catches NaN
		o.StragglerMinShare = d.StragglerMinShare
	}
	if o.StragglerMinLag <= 0 {
		o.StragglerMinLag = d.StragglerMinLag
	}
	if !(o.StragglerLagFactor > 0) {
		o.StragglerLagFactor = d.StragglerLagFactor
	}
	if o.StragglerMinCollectives <= 0 {
		o.StragglerMinCollectives = d.StragglerMinCollectives
	}
	if o.StragglerMinRanks <= 0 {
		o.StragglerMinRanks = d.StragglerMinRanks
	}
	if o.MinStatusGap <= 0 {
		o.MinStatusGap = d.MinStatusGap
	}
	if o.StallAfter <= 0 {
		o.StallAfter = d.StallAfter
	}
	return o
}

// Analyze compares the dumps and returns what it found. Nil dumps are
// skipped; when a rank appears twice the later dump wins. Fewer than two
// ranks yield only timeouts. It is AnalyzeRanks of each dump's Compact.
func Analyze(dumps []RankDump, opts Options) Report {
	ranks := make([]*Rank, 0, len(dumps))
	for _, d := range dumps {
		if d.Dump != nil {
			ranks = append(ranks, Compact(d.Rank, d.Dump))
		}
	}
	return AnalyzeRanks(ranks, opts)
}

// AnalyzeRanks compares the ranks' records and returns what it found. Nil
// ranks are skipped; when a rank appears twice the later one wins. Fewer
// than two ranks yield only timeouts.
func AnalyzeRanks(ranks []*Rank, opts Options) Report {
	opts = opts.withDefaults()
	al := align(ranks)
	rep := Report{Ranks: al.rankIDs(), WindowStartRecordID: al.windowStart}

	for _, g := range al.groups {
		if f, ok := findMissingRanks(g); ok {
			rep.Findings = append(rep.Findings, f)
		}
		rep.Findings = append(rep.Findings, findMismatches(g)...)
		if f, ok := findStraggler(g, opts); ok {
			rep.Findings = append(rep.Findings, f)
		}
	}
	rep.Findings = append(rep.Findings, findStatusDivergence(al, opts)...)
	rep.Findings = append(rep.Findings, findTimeouts(al)...)
	rep.Findings = culpritPass(al, rep.Findings, opts)
	sortFindings(rep.Findings)
	return rep
}

// Headline is the finding to read first: the job's hang (Findings[0], with
// the culprits in Ranks, the collective they never entered in Stuck and the
// per-group findings it explains in Folded); nil when the analysis found no
// hang.
func (r *Report) Headline() *Finding {
	if len(r.Findings) > 0 && r.Findings[0].Kind == KindHang {
		return &r.Findings[0]
	}
	return nil
}

// sortFindings puts a hang first, then orders by process group, sequence
// and kind.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := &fs[i], &fs[j]
		if (a.Kind == KindHang) != (b.Kind == KindHang) {
			return a.Kind == KindHang
		}
		if a.PGName != b.PGName {
			return a.PGName < b.PGName
		}
		if a.P2P != b.P2P {
			return !a.P2P
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return kindOrder(a.Kind) < kindOrder(b.Kind)
	})
}

func kindOrder(k Kind) int {
	switch k {
	case KindHang:
		return -1
	case KindMissingRanks:
		return 0
	case KindPGStatusDivergence:
		return 1
	case KindTimeout:
		return 2
	case KindMismatch:
		return 3
	default:
		return 4
	}
}
