package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
)

// result is what fr-analyze reports; its JSON form is --json's output.
type result struct {
	Dumps               []dumpInfo    `json:"dumps"`
	Ranks               []int         `json:"ranks"`
	WindowStartRecordID int64         `json:"window_start_record_id"`
	Findings            []finding     `json:"findings"`
	Warnings            []fileProblem `json:"warnings"`
	Skipped             []fileProblem `json:"skipped"`
	Errors              []fileProblem `json:"errors"`
	ExitStatus          int           `json:"exit_status"`
}

type dumpInfo struct {
	Path     string `json:"path"`
	Rank     int    `json:"rank"`
	Form     string `json:"form"`
	Version  string `json:"version"`
	Entries  int    `json:"entries"`
	DumpedAt string `json:"dumped_at"` // the file's mtime, RFC 3339
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
	Message    string `json:"message"`
	// PythonStacks by rank: the frames of the finding's evidence
	// (rank.<r>.python_stack), innermost first, one "name (file:line)" each.
	PythonStacks map[string][]string `json:"python_stacks,omitempty"`
	Evidence     map[string]string   `json:"evidence"`
}

// analyze runs the receiver's analysis over the dumps read.
func analyze(l *loaded, opts analysis.Options) result {
	res := result{Warnings: l.warnings, Skipped: l.skipped, Errors: l.errors}
	ranks := make([]*analysis.Rank, len(l.dumps))
	for i, in := range l.dumps {
		ranks[i] = in.records
		res.Dumps = append(res.Dumps, dumpInfo{
			Path: in.path, Rank: in.rank, Form: in.form, Version: in.version,
			Entries: len(in.records.Ops), DumpedAt: time.Unix(0, in.mtime).UTC().Format(time.RFC3339),
		})
	}
	rep := analysis.AnalyzeRanks(ranks, opts)
	res.Ranks, res.WindowStartRecordID = rep.Ranks, rep.WindowStartRecordID
	res.Findings = make([]finding, 0, len(rep.Findings))
	for _, f := range rep.Findings {
		res.Findings = append(res.Findings, toFinding(f))
	}
	switch {
	case len(res.Findings) > 0:
		res.ExitStatus = exitFindings
	case len(res.Errors) > 0 || len(res.Dumps) == 0:
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
	if res.Dumps == nil {
		res.Dumps = []dumpInfo{}
	}
	if res.Ranks == nil {
		res.Ranks = []int{}
	}
	return res
}

const stackSuffix = "." + analysis.EvidencePythonStack

func toFinding(f analysis.Finding) finding {
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
	return out
}

func writeJSON(w io.Writer, res result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// writeText prints the result for an engineer: what was read, then each
// finding with its fr_trace-worded message, its ranks and, for stuck ranks,
// the Python stack one frame a line.
func writeText(w io.Writer, res result) error {
	var b strings.Builder
	versions := map[string]bool{}
	for _, d := range res.Dumps {
		versions[d.Version] = true
	}
	vs := make([]string, 0, len(versions))
	for v := range versions {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	fmt.Fprintf(&b, "read %d dumps: ranks %s (schema %s)", len(res.Dumps), ranges(res.Ranks), strings.Join(vs, ", "))
	if res.WindowStartRecordID > 0 {
		fmt.Fprintf(&b, "; entries before record_id %d dropped (the ranks' ring buffers wrapped)", res.WindowStartRecordID)
	}
	b.WriteString("\n")
	for _, p := range res.Errors {
		fmt.Fprintf(&b, "error: %s: %s\n", p.Path, p.Reason)
	}
	for _, p := range res.Warnings {
		fmt.Fprintf(&b, "warning: %s: %s\n", p.Path, p.Reason)
	}
	for _, p := range res.Skipped {
		fmt.Fprintf(&b, "skipped: %s: %s\n", p.Path, p.Reason)
	}
	if len(res.Findings) == 0 {
		b.WriteString("\nno problem found\n")
	}
	for i, f := range res.Findings {
		fmt.Fprintf(&b, "\n[%d] %s", i+1, strings.ToUpper(strings.ReplaceAll(f.Kind, "_", " ")))
		fmt.Fprintf(&b, " in process group %s", f.PGName)
		if f.PGDesc != "" {
			fmt.Fprintf(&b, " (%s)", f.PGDesc)
		}
		if f.Seq > 0 {
			space := "collective"
			if f.P2P {
				space = "p2p op"
			}
			fmt.Fprintf(&b, ", %s %d", space, f.Seq)
		}
		if f.Collective != "" {
			fmt.Fprintf(&b, " %s", f.Collective)
		}
		fmt.Fprintf(&b, ": ranks %s\n", ranges(f.Ranks))
		for _, line := range strings.Split(f.Message, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "python stack:") {
				continue // printed below, one frame a line
			}
			fmt.Fprintf(&b, "    %s\n", line)
		}
		ranks := make([]int, 0, len(f.PythonStacks))
		for r := range f.PythonStacks {
			n, _ := strconv.Atoi(r)
			ranks = append(ranks, n)
		}
		sort.Ints(ranks)
		for _, r := range ranks {
			fmt.Fprintf(&b, "    python stack of rank %d:\n", r)
			for _, frame := range f.PythonStacks[strconv.Itoa(r)] {
				fmt.Fprintf(&b, "      %s\n", frame)
			}
		}
	}
	if len(res.Findings) > 0 {
		fmt.Fprintf(&b, "\n%d problems found\n", len(res.Findings))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ranges renders ascending ranks as ranges: "0-3, 5".
func ranges(rs []int) string {
	if len(rs) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(rs[i]))
		} else {
			parts = append(parts, strconv.Itoa(rs[i])+"-"+strconv.Itoa(rs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
