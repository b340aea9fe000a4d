package ras

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kind names what a finding is about.
type Kind string

const (
	// KindMissingRanks: ranks of a communicator that RAS could not get the state of.
	KindMissingRanks Kind = "missing_ranks"
	// KindAsyncError: a rank's communicator holds an asynchronous error (network failure, remote error...).
	KindAsyncError Kind = "async_error"
	// KindInitError: a rank's communicator failed to initialize.
	KindInitError Kind = "init_error"
	// KindAbort: a rank aborted the communicator (ncclCommAbort, or NCCL after an error).
	KindAbort Kind = "abort"
	// KindRankBehind: a rank issued fewer collectives than the rank that issued the most: the others
	// wait in a collective it has not joined (unresponsive, or a straggler if the counts keep moving).
	KindRankBehind Kind = "rank_behind"
)

// maxRankDetails is how many ranks of one kind get a finding each (NCCL's own RAS_CLIENT_DETAIL_THRESHOLD);
// beyond it one finding covers them all, so a 4096-rank failure does not become 4096 log records.
const maxRankDetails = 10

// ncclResult_t values that are not errors.
const (
	ncclSuccess    = 0
	ncclInProgress = 7
)

// RankRef identifies a rank the way RAS gives it. Host is an IP address or "unknown"; PID is -1 when unknown.
type RankRef struct {
	Rank    int
	Host    string
	PID     int
	CUDADev int
	NVMLDev int
}

// Finding is one problem RAS shows. Every node's RAS reports the same job-wide view, so the same problem
// found on every node has the same Key, for the gateway to deduplicate.
type Finding struct {
	Kind Kind
	Job  string
	// Communicator is the communicator's hash and SecondaryHash its "hostHash:pidHash" (together unique).
	Communicator     string
	SecondaryHash    string
	CommunicatorSize int
	// Sequence is a signature of the collective counts of every reporting rank of the communicator: it stays the
	// same while the job is stuck (so repeated polls and other nodes give the same key) and changes once the job
	// moves on, so a later occurrence of the same problem gets a new key.
	Sequence string
	Ranks    []RankRef // the ranks the finding is about, sorted by rank
	// MissingRanksUnknown counts missing ranks that RAS counted but did not describe.
	MissingRanksUnknown int
	Message             string // human-readable, with the evidence
}

// Key is the deduplication key: job, communicator, kind, ranks and sequence.
func (f Finding) Key() string {
	ranks := make([]int, len(f.Ranks))
	for i, r := range f.Ranks {
		ranks[i] = r.Rank
	}
	return strings.Join([]string{
		f.Job, f.Communicator + ":" + f.SecondaryHash, string(f.Kind), rankList(ranks), f.Sequence,
	}, "|")
}

// Findings turns one STATUS into findings: per communicator one for its missing ranks, and per rank one for an
// async or init error, an abort, or collective counts behind the others. job names the job in keys and
// messages. A nil status gives none.
func Findings(st *Status, job string) []Finding {
	if st == nil {
		return nil
	}
	var findings []Finding
	for i := range st.Communicators {
		findings = append(findings, communicatorFindings(&st.Communicators[i], job, st.RAS.TimeoutsCount)...)
	}
	return findings
}

// Repeated returns the findings of current whose key was also in previous. A lag on a healthy, running job
// changes key at every poll; one that repeats means the counts stopped moving, so callers that poll can emit
// rank_behind findings only once they repeat.
func Repeated(previous, current []Finding) []Finding {
	seen := make(map[string]struct{}, len(previous))
	for _, f := range previous {
		seen[f.Key()] = struct{}{}
	}
	var repeated []Finding
	for _, f := range current {
		if _, ok := seen[f.Key()]; ok {
			repeated = append(repeated, f)
		}
	}
	return repeated
}

// rankIssue is one rank's problem of one kind, with its evidence.
type rankIssue struct {
	ref    RankRef
	detail string
}

func communicatorFindings(comm *Communicator, job string, rasTimeouts int) []Finding {
	base := Finding{
		Job:              job,
		Communicator:     comm.Hash,
		SecondaryHash:    comm.SecondaryHash,
		CommunicatorSize: comm.Size,
		Sequence:         countsSignature(comm.Ranks),
	}
	name := fmt.Sprintf("communicator %s (size %d)", comm.Hash, comm.Size)

	var findings []Finding
	if f, ok := missingRanksFinding(comm, base, name, rasTimeouts); ok {
		findings = append(findings, f)
	}

	var aborted, asyncErrors, initErrors []rankIssue
	for _, r := range comm.Ranks {
		ref := RankRef{Rank: r.Rank, Host: r.Host, PID: r.PID, CUDADev: r.CUDADev, NVMLDev: r.NVMLDev}
		if r.Status.AbortFlag {
			aborted = append(aborted, rankIssue{ref, "abort_flag set"})
		}
		if isError(r.Status.AsyncError) {
			asyncErrors = append(asyncErrors, rankIssue{ref, "async_error " + resultName(r.Status.AsyncError)})
		}
		if isError(r.Status.InitState) {
			initErrors = append(initErrors, rankIssue{ref, "init_state " + resultName(r.Status.InitState)})
		}
	}
	findings = append(findings, rankFindings(base, KindAbort, name, "aborted the communicator", aborted)...)
	findings = append(findings, rankFindings(base, KindAsyncError, name, "reports an asynchronous error", asyncErrors)...)
	findings = append(findings, rankFindings(base, KindInitError, name, "failed to initialize", initErrors)...)
	findings = append(findings, rankFindings(base, KindRankBehind, name,
		"is behind the others in collectives issued (unresponsive?)", ranksBehind(comm.Ranks))...)
	return findings
}

func missingRanksFinding(comm *Communicator, base Finding, name string, rasTimeouts int) (Finding, bool) {
	// RAS may count missing ranks it cannot describe; size - ranks_count is the floor either way
	// (computed only when it cannot overflow on nonsense input).
	sizeGap := 0
	if comm.RanksCount >= 0 && comm.Size > comm.RanksCount {
		sizeGap = comm.Size - comm.RanksCount
	}
	missing := max(comm.MissingRanksCount, sizeGap, len(comm.MissingRanks))
	if missing <= 0 {
		return Finding{}, false
	}
	f := base
	f.Kind = KindMissingRanks
	var details []string
	for _, m := range sortedMissing(comm.MissingRanks) {
		ref := RankRef{Rank: m.Rank, Host: m.Host, PID: m.PID, CUDADev: m.CUDADev, NVMLDev: m.NVMLDev}
		f.Ranks = append(f.Ranks, ref)
		if len(details) < maxRankDetails {
			details = append(details, describe(ref)+" "+missingReason(m.Status))
		}
	}
	f.MissingRanksUnknown = missing - len(comm.MissingRanks)

	var msg strings.Builder
	fmt.Fprintf(&msg, "%s: %d of %d ranks missing from the RAS view", name, missing, comm.Size)
	if len(details) > 0 {
		msg.WriteString(": " + strings.Join(details, "; "))
	}
	if extra := len(f.Ranks) - len(details); extra > 0 {
		fmt.Fprintf(&msg, "; and %d more (ranks %s)", extra, rankList(refRanks(f.Ranks[len(details):])))
	}
	if f.MissingRanksUnknown > 0 {
		fmt.Fprintf(&msg, "; %d missing without details", f.MissingRanksUnknown)
	}
	if rasTimeouts > 0 {
		fmt.Fprintf(&msg, " (RAS had %d timeouts gathering the data: it may be incomplete)", rasTimeouts)
	}
	f.Message = msg.String()
	return f, true
}

func missingReason(s MissingRankStatus) string {
	switch {
	case s.ConsideredDead:
		return "is considered dead"
	case s.Unresponsive:
		return "is unresponsive"
	default:
		return "answered RAS but no longer reports this communicator (destroyed or aborted?)"
	}
}

// rankFindings makes one finding per rank, or one for all of them when there are more than maxRankDetails.
func rankFindings(base Finding, kind Kind, name, what string, issues []rankIssue) []Finding {
	if len(issues) == 0 {
		return nil
	}
	slices.SortFunc(issues, func(a, b rankIssue) int { return cmp.Compare(a.ref.Rank, b.ref.Rank) })
	base.Kind = kind
	if len(issues) <= maxRankDetails {
		findings := make([]Finding, 0, len(issues))
		for _, issue := range issues {
			f := base
			f.Ranks = []RankRef{issue.ref}
			f.Message = fmt.Sprintf("%s: %s %s: %s", name, describe(issue.ref), what, issue.detail)
			findings = append(findings, f)
		}
		return findings
	}
	f := base
	details := make([]string, 0, maxRankDetails)
	for i, issue := range issues {
		f.Ranks = append(f.Ranks, issue.ref)
		if i < maxRankDetails {
			details = append(details, describe(issue.ref)+": "+issue.detail)
		}
	}
	f.Message = fmt.Sprintf("%s: %d ranks (%s) %s: %s; and %d more", name, len(issues), rankList(refRanks(f.Ranks)),
		pluralVerb(what), strings.Join(details, "; "), len(issues)-maxRankDetails)
	return []Finding{f}
}

// pluralVerb turns "is behind ..." into "are behind ..." for a group of ranks.
func pluralVerb(what string) string {
	if rest, ok := strings.CutPrefix(what, "is "); ok {
		return "are " + rest
	}
	if rest, ok := strings.CutPrefix(what, "reports "); ok {
		return "report " + rest
	}
	return what
}

// ranksBehind lists the ranks that issued fewer collectives of some kind than the rank that issued the most.
func ranksBehind(ranks []Rank) []rankIssue {
	if len(ranks) < 2 {
		return nil
	}
	most := map[string]uint64{}
	for _, r := range ranks {
		for op, n := range r.CollectiveCounts {
			most[op] = max(most[op], n)
		}
	}
	ops := sortedKeys(most)
	var behind []rankIssue
	for _, r := range ranks {
		var gaps []string
		for _, op := range ops {
			if n := r.CollectiveCounts[op]; n < most[op] {
				gaps = append(gaps, fmt.Sprintf("%s %d of %d", op, n, most[op]))
			}
		}
		if len(gaps) > 0 {
			ref := RankRef{Rank: r.Rank, Host: r.Host, PID: r.PID, CUDADev: r.CUDADev, NVMLDev: r.NVMLDev}
			behind = append(behind, rankIssue{ref, strings.Join(gaps, ", ") + " (the most any rank issued)"})
		}
	}
	return behind
}

// countsSignature hashes every reporting rank's collective counts, in rank and name order, so any node
// computes the same value from the same job state.
func countsSignature(ranks []Rank) string {
	sorted := slices.Clone(ranks)
	slices.SortFunc(sorted, func(a, b Rank) int { return cmp.Compare(a.Rank, b.Rank) })
	h := fnv.New64a()
	for _, r := range sorted {
		fmt.Fprintf(h, "%d:", r.Rank)
		for _, op := range sortedKeys(r.CollectiveCounts) {
			fmt.Fprintf(h, "%s=%d,", op, r.CollectiveCounts[op])
		}
		h.Write([]byte{';'})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

func sortedMissing(missing []MissingRank) []MissingRank {
	sorted := slices.Clone(missing)
	slices.SortFunc(sorted, func(a, b MissingRank) int { return cmp.Compare(a.Rank, b.Rank) })
	return sorted
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func refRanks(refs []RankRef) []int {
	ranks := make([]int, len(refs))
	for i, r := range refs {
		ranks[i] = r.Rank
	}
	return ranks
}

// describe names a rank with what RAS knows of it: "rank 1 (host 172.16.64.245, pid 1524345, GPU 1)".
func describe(r RankRef) string {
	gpu := strconv.Itoa(r.CUDADev)
	if r.NVMLDev != r.CUDADev {
		gpu += fmt.Sprintf(" (NVML %d)", r.NVMLDev)
	}
	return fmt.Sprintf("rank %d (host %s, pid %d, GPU %s)", r.Rank, r.Host, r.PID, gpu)
}

// rankList writes ranks compactly, with runs as ranges: "0-3,5,7-8". The input need not be sorted.
func rankList(ranks []int) string {
	sorted := slices.Clone(ranks)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var b strings.Builder
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sorted[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(sorted[j]))
		}
		i = j + 1
	}
	return b.String()
}

func isError(result int) bool {
	return result != ncclSuccess && result != ncclInProgress
}

// resultName spells an ncclResult_t code the way NCCL's ncclGetErrorString does, with the number.
func resultName(result int) string {
	names := map[int]string{
		1: "unhandled cuda error",
		2: "unhandled system error",
		3: "internal error",
		4: "invalid argument",
		5: "invalid usage",
		6: "remote process exited or there was a network error",
		7: "NCCL operation in progress",
	}
	if name, ok := names[result]; ok {
		return fmt.Sprintf("%d (%s)", result, name)
	}
	return strconv.Itoa(result)
}
