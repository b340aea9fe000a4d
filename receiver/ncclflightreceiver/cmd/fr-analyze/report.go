package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
)

// Time bases: what a rank's idle time is measured against.
const (
	// timeBaseEntries: the newest time any dump of the incident records
	// (entries' time_created_ns and the watchdog's times): the dumps' own
	// clocks, which a copy keeps.
	timeBaseEntries = "entries"
	// timeBaseMtime: each file's mtime, as the receiver reads it on the
	// node (--use-mtime).
	timeBaseMtime = "mtime"
)

// result is what fr-analyze reports; its JSON form is --json's output.
type result struct {
	TimeBase   string           `json:"time_base"`
	Incidents  []incidentResult `json:"incidents"`
	Warnings   []fileProblem    `json:"warnings"`
	Skipped    []fileProblem    `json:"skipped"`
	Errors     []fileProblem    `json:"errors"`
	ExitStatus int              `json:"exit_status"`
}

// incidentResult is the analysis of one incident (incidents.go).
type incidentResult struct {
	// Name is the directory holding the incident's dumps.
	Name        string   `json:"name"`
	Directories []string `json:"directories"`
	// WorldSize is the job's size from pg_config (0 when unknown); Absent
	// are its ranks no dump was read of.
	WorldSize   int    `json:"world_size"`
	Ranks       []int  `json:"ranks"`
	Absent      []int  `json:"absent_ranks"`
	NewestEntry string `json:"newest_entry,omitempty"` // RFC 3339, the newest time the dumps record
	// DumpMoment says what the ranks' idle times are measured against:
	// "newest entry + timeout_ms <n>" (estimated from the dumps), "file
	// mtimes" (--use-mtime), or "unknown" (nothing is then called stopped).
	DumpMoment          string     `json:"dump_moment"`
	Dumps               []dumpInfo `json:"dumps"`
	WindowStartRecordID int64      `json:"window_start_record_id"`
	// Findings reported, in the analysis' order: the first is the answer.
	Findings []finding `json:"findings"`
	// Hidden counts the findings --ranks and --pg left out.
	Hidden int `json:"hidden_findings"`
}

type dumpInfo struct {
	Path        string `json:"path"`
	Rank        int    `json:"rank"`
	Form        string `json:"form"`
	Version     string `json:"version"`
	Entries     int    `json:"entries"`
	NewestEntry string `json:"newest_entry,omitempty"` // RFC 3339; absent when the dump has no entries
	DumpedAt    string `json:"dumped_at"`              // the time base the analysis used for it, RFC 3339
	FileMtime   string `json:"file_mtime"`
}

// finding is an analysis.Finding as tools read it.
type finding struct {
	Kind       string `json:"kind"`
	Key        string `json:"key"` // the receiver's finding key without job and directory
	PGID       int64  `json:"pg_id"`
	PGName     string `json:"pg_name"`
	PGDesc     string `json:"pg_desc,omitempty"`
	Seq        int64  `json:"seq,omitempty"`
	P2P        bool   `json:"p2p,omitempty"`
	Collective string `json:"collective,omitempty"`
	Ranks      []int  `json:"ranks"`
	// Shape is the collective's sizes and dtypes, as the lowest rank that
	// enqueued it recorded them; absent when no dump holds it.
	Shape *shape `json:"shape,omitempty"`
	// Groups are the process groups the finding is about: its own and, for
	// a hang, every group its evidence names.
	Groups  []groupRef `json:"groups,omitempty"`
	Message string     `json:"message"`
	// PythonStacks by rank: the frames of the finding's evidence
	// (rank.<r>.python_stack), innermost first, one "name (file:line)" each.
	PythonStacks map[string][]string `json:"python_stacks,omitempty"`
	Evidence     map[string]string   `json:"evidence"`
}

type groupRef struct {
	Name string `json:"name"`
	Desc string `json:"desc,omitempty"`
}

// shape is what a collective moves.
type shape struct {
	Rank         int       `json:"rank"` // whose entry it is
	InputSizes   [][]int64 `json:"input_sizes"`
	OutputSizes  [][]int64 `json:"output_sizes"`
	InputDtypes  []string  `json:"input_dtypes"`
	OutputDtypes []string  `json:"output_dtypes"`
	// Differs: other ranks recorded other sizes (all_to_all moves
	// different amounts per rank).
	Differs bool `json:"sizes_differ_across_ranks,omitempty"`
}

// analyze runs the receiver's analysis over each incident.
func analyze(l *loaded, incidents []*incident, opts analysis.Options, useMtime bool, flt filter) result {
	res := result{TimeBase: timeBaseEntries, Warnings: l.warnings, Skipped: l.skipped, Errors: l.errors}
	if useMtime {
		res.TimeBase = timeBaseMtime
	}
	reported := 0
	for _, c := range incidents {
		ir := analyzeIncident(c, opts, useMtime, flt)
		reported += len(ir.Findings)
		res.Incidents = append(res.Incidents, ir)
	}
	switch {
	case reported > 0:
		res.ExitStatus = exitFindings
	case len(res.Errors) > 0 || len(incidents) == 0:
		res.ExitStatus = exitError
	default:
		res.ExitStatus = exitClean
	}
	// Never null in JSON: tools iterate them.
	for _, s := range []*[]fileProblem{&res.Warnings, &res.Skipped, &res.Errors} {
		if *s == nil {
			*s = []fileProblem{}
		}
	}
	if res.Incidents == nil {
		res.Incidents = []incidentResult{}
	}
	return res
}

func analyzeIncident(c *incident, opts analysis.Options, useMtime bool, flt filter) incidentResult {
	ir := incidentResult{Name: c.name, Directories: c.dirs, WorldSize: c.world, Absent: []int{}}
	if c.newest > 0 {
		ir.NewestEntry = rfc3339(c.newest)
	}
	switch {
	case useMtime:
		ir.DumpMoment = "file mtimes"
	case c.dumpedAt() > 0:
		ir.DumpMoment = fmt.Sprintf("newest entry + timeout_ms %d", c.timeout().Milliseconds())
	default:
		ir.DumpMoment = "unknown"
	}
	ranks := make([]*analysis.Rank, len(c.dumps))
	for i, in := range c.dumps {
		// The dump's moment. Without --use-mtime: the incident's newest
		// recorded time, so that a rank's idle time is how long before
		// the job's last recorded activity it enqueued its newest entry.
		in.records.DumpedAtNs = c.dumpedAt()
		if useMtime {
			in.records.DumpedAtNs = in.mtime
		}
		ranks[i] = in.records
		d := dumpInfo{
			Path: in.path, Rank: in.rank, Form: in.form, Version: in.version, Entries: len(in.records.Ops),
			DumpedAt: rfc3339(in.records.DumpedAtNs), FileMtime: rfc3339(in.mtime),
		}
		if in.timed() {
			d.NewestEntry = rfc3339(in.newest)
		}
		ir.Dumps = append(ir.Dumps, d)
	}
	for r := range c.world {
		if _, ok := c.ranks[r]; !ok {
			ir.Absent = append(ir.Absent, r)
		}
	}
	rep := analysis.AnalyzeRanks(ranks, opts)
	ir.Ranks, ir.WindowStartRecordID = rep.Ranks, rep.WindowStartRecordID
	ir.Findings = make([]finding, 0, len(rep.Findings))
	for _, f := range rep.Findings {
		fd := toFinding(f, c)
		if !flt.keeps(fd) {
			ir.Hidden++
			continue
		}
		if flt.ranks != nil {
			for r := range fd.PythonStacks {
				if n, err := strconv.Atoi(r); err == nil && !flt.ranks[n] {
					delete(fd.PythonStacks, r)
				}
			}
		}
		ir.Findings = append(ir.Findings, fd)
	}
	if ir.Ranks == nil {
		ir.Ranks = []int{}
	}
	if ir.Dumps == nil {
		ir.Dumps = []dumpInfo{}
	}
	return ir
}

func rfc3339(ns int64) string {
	if ns <= 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

const stackSuffix = "." + analysis.EvidencePythonStack

func toFinding(f analysis.Finding, c *incident) finding {
	out := finding{
		Kind: string(f.Kind), Key: f.Key().String(), PGID: f.PGID, PGName: f.PGName, PGDesc: f.PGDesc,
		Seq: f.Seq, P2P: f.P2P, Collective: f.ProfilingName, Ranks: f.Ranks, Message: f.Message,
		Evidence: f.Evidence,
	}
	if out.Ranks == nil {
		out.Ranks = []int{}
	}
	if out.Evidence == nil {
		out.Evidence = map[string]string{}
	}
	for k, v := range f.Evidence {
		rank, ok := strings.CutPrefix(k, "rank.")
		if !ok {
			continue
		}
		if rank, ok = strings.CutSuffix(rank, stackSuffix); !ok || strings.Contains(rank, ".") {
			continue
		}
		if out.PythonStacks == nil {
			out.PythonStacks = map[string][]string{}
		}
		out.PythonStacks[rank] = strings.Split(v, "; ")
	}
	out.Shape = shapeOf(out, c)
	out.Groups = groupsOf(out, c)
	return out
}

// shapeOf finds the finding's collective in the incident's dumps: the
// entry of the lowest rank that enqueued it (the reference analyzer's
// choice), and whether other ranks recorded other input sizes.
func shapeOf(f finding, c *incident) *shape {
	if f.Collective == "" || f.Seq <= 0 || f.P2P {
		return nil
	}
	var out *shape
	for _, in := range c.dumps {
		for i := range in.records.Ops {
			op := &in.records.Ops[i]
			if op.IsP2P || op.PGName != f.PGName || op.CollectiveSeqID != f.Seq || op.ProfilingName != f.Collective {
				continue
			}
			if out == nil {
				out = &shape{Rank: in.rank, InputSizes: op.InputSizes, OutputSizes: op.OutputSizes,
					InputDtypes: op.InputDtypes, OutputDtypes: op.OutputDtypes}
			} else if !sameSizes(out.InputSizes, op.InputSizes) || !sameSizes(out.OutputSizes, op.OutputSizes) {
				out.Differs = true
			}
			break
		}
	}
	return out
}

func sameSizes(a, b [][]int64) bool { return slices.EqualFunc(a, b, slices.Equal[[]int64]) }

// groupsOf is the finding's own process group and those its evidence names
// (pg.<name>.… and rank.<r>.pg.<name>.… keys), with their descriptions.
func groupsOf(f finding, c *incident) []groupRef {
	names := map[string]bool{}
	if f.PGName != "" {
		names[f.PGName] = true
	}
	for k := range f.Evidence {
		i := strings.Index(k, "pg.")
		if i < 0 || (i > 0 && k[i-1] != '.') {
			continue
		}
		if name, _, ok := strings.Cut(k[i+3:], "."); ok && name != "" {
			names[name] = true
		}
	}
	out := make([]groupRef, 0, len(names))
	for n := range names {
		g := groupRef{Name: n, Desc: c.pgs[n].Desc}
		if n == f.PGName && f.PGDesc != "" {
			g.Desc = f.PGDesc
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func writeJSON(w io.Writer, res result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
