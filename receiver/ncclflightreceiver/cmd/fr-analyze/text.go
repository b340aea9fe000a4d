package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// writeText prints the result for an engineer. Each incident opens with
// three lines that give its answer: the incident (directory, world size,
// ranks, time), then the analysis' first finding (its kind, process group
// id and description, collective, ranks), then the collective's sizes and
// dtypes. The rest of that finding and the other findings follow, each
// with its fr_trace-worded message and, for stuck ranks, the Python stack
// one frame a line. Files that were not analysed come last: errors one a
// line, warnings and skipped files counted by reason (-v lists them).
func writeText(w io.Writer, res result, flt filter, verbose bool) error {
	var b strings.Builder
	total := 0
	for i, inc := range res.Incidents {
		if i > 0 {
			b.WriteString("\n")
		}
		writeIncident(&b, inc, i, len(res.Incidents), flt)
		total += len(inc.Findings)
	}
	if len(res.Errors)+len(res.Warnings)+len(res.Skipped) > 0 {
		b.WriteString("\n")
	}
	for _, p := range res.Errors {
		fmt.Fprintf(&b, "error: %s: %s\n", p.Path, p.Reason)
	}
	writeProblems(&b, "warning", res.Warnings, verbose)
	writeProblems(&b, "skipped", res.Skipped, verbose)
	switch {
	case len(res.Incidents) == 0:
		b.WriteString("\nno dump read\n")
	case total == 0:
		fmt.Fprintf(&b, "\n%s: no problem found\n", plural(len(res.Incidents), "incident"))
	default:
		fmt.Fprintf(&b, "\n%s: %s found\n", plural(len(res.Incidents), "incident"), plural(total, "problem"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeIncident(b *strings.Builder, inc incidentResult, i, n int, flt filter) {
	b.WriteString("incident ")
	if n > 1 {
		fmt.Fprintf(b, "%d of %d ", i+1, n)
	}
	fmt.Fprintf(b, "%s: ", inc.Name)
	if inc.WorldSize > 0 {
		fmt.Fprintf(b, "world %d, ", inc.WorldSize)
	}
	fmt.Fprintf(b, "%s %s (schema %s)", plural(len(inc.Dumps), "dump")+" of ranks", ranges(inc.Ranks), strings.Join(versions(inc.Dumps), ", "))
	if inc.NewestEntry != "" {
		fmt.Fprintf(b, ", newest entry %s", inc.NewestEntry)
	}
	if len(inc.Absent) > 0 {
		fmt.Fprintf(b, "; no dump of ranks %s", ranges(inc.Absent))
	}
	fmt.Fprintf(b, "; dump moment: %s", inc.DumpMoment)
	b.WriteString("\n")

	if len(inc.Findings) == 0 {
		if inc.Hidden > 0 {
			fmt.Fprintf(b, "no finding about %s (%s hidden)\n", flt.describe(), plural(inc.Hidden, "other finding"))
		} else {
			b.WriteString("no problem found\n")
		}
	}
	for j, f := range inc.Findings {
		if j > 0 {
			b.WriteString("\n")
		}
		writeFinding(b, j+1, f)
	}
	if inc.WindowStartRecordID > 0 {
		fmt.Fprintf(b, "note: entries before record_id %d dropped (the ranks' ring buffers wrapped)\n", inc.WindowStartRecordID)
	}
	if len(inc.Findings) > 0 && inc.Hidden > 0 {
		fmt.Fprintf(b, "note: %s hidden by %s\n", plural(inc.Hidden, "other finding"), flt.describe())
	}
}

func writeFinding(b *strings.Builder, n int, f finding) {
	fmt.Fprintf(b, "[%d] %s", n, strings.ToUpper(strings.ReplaceAll(f.Kind, "_", " ")))
	fmt.Fprintf(b, " in process group %s", f.PGName)
	if f.PGDesc != "" {
		fmt.Fprintf(b, " (%s)", f.PGDesc)
	}
	if f.Seq > 0 {
		space := "collective"
		if f.P2P {
			space = "p2p op"
		}
		fmt.Fprintf(b, ", %s %d", space, f.Seq)
	}
	if f.Collective != "" {
		fmt.Fprintf(b, " %s", f.Collective)
	}
	fmt.Fprintf(b, ": ranks %s\n", ranges(f.Ranks))
	if s := f.Shape; s != nil {
		fmt.Fprintf(b, "    input %s %s, output %s %s (rank %d's entry",
			sizesText(s.InputSizes), dtypesText(s.InputDtypes), sizesText(s.OutputSizes), dtypesText(s.OutputDtypes), s.Rank)
		if s.Differs {
			b.WriteString("; sizes differ across ranks")
		}
		b.WriteString(")\n")
	}
	for _, line := range strings.Split(f.Message, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "python stack:") {
			continue // printed below, one frame a line
		}
		fmt.Fprintf(b, "    %s\n", line)
	}
	ranks := make([]int, 0, len(f.PythonStacks))
	for r := range f.PythonStacks {
		n, _ := strconv.Atoi(r)
		ranks = append(ranks, n)
	}
	sort.Ints(ranks)
	for _, r := range ranks {
		fmt.Fprintf(b, "    python stack of rank %d:\n", r)
		for _, frame := range f.PythonStacks[strconv.Itoa(r)] {
			fmt.Fprintf(b, "      %s\n", frame)
		}
	}
}

// writeProblems prints files that were not analysed (or with a warning):
// counted by reason, one line for all, unless verbose or only one.
func writeProblems(b *strings.Builder, label string, ps []fileProblem, verbose bool) {
	if len(ps) == 0 {
		return
	}
	if verbose || len(ps) == 1 {
		for _, p := range ps {
			fmt.Fprintf(b, "%s: %s: %s", label, p.Path, p.Reason)
			if p.Detail != "" {
				fmt.Fprintf(b, ": %s", p.Detail)
			}
			b.WriteString("\n")
		}
		return
	}
	count := map[string]int{}
	var reasons []string
	for _, p := range ps {
		if count[p.Reason] == 0 {
			reasons = append(reasons, p.Reason)
		}
		count[p.Reason]++
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%d %s", count[r], r)
	}
	fmt.Fprintf(b, "%s %s: %s (-v lists them)\n", label, plural(len(ps), "file"), strings.Join(parts, "; "))
}

func (f filter) describe() string {
	var parts []string
	if f.ranks != nil {
		parts = append(parts, "--ranks "+f.rankText)
	}
	if f.pg != "" {
		parts = append(parts, "--pg "+f.pg)
	}
	return strings.Join(parts, " ")
}

func versions(ds []dumpInfo) []string {
	seen := map[string]bool{}
	var vs []string
	for _, d := range ds {
		if !seen[d.Version] {
			seen[d.Version] = true
			vs = append(vs, d.Version)
		}
	}
	sort.Strings(vs)
	return vs
}

// sizesText renders tensor sizes as the reference analyzer does: 2048x5120,
// several tensors separated by commas, a scalar as "scalar".
func sizesText(sizes [][]int64) string {
	if len(sizes) == 0 {
		return "none"
	}
	parts := make([]string, len(sizes))
	for i, s := range sizes {
		if len(s) == 0 {
			parts[i] = "scalar"
			continue
		}
		dims := make([]string, len(s))
		for j, d := range s {
			dims[j] = strconv.FormatInt(d, 10)
		}
		parts[i] = strings.Join(dims, "x")
	}
	return strings.Join(parts, ", ")
}

// dtypesText lists the distinct dtypes, in order.
func dtypesText(dtypes []string) string {
	var out []string
	for _, d := range dtypes {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return "(dtype unknown)"
	}
	return strings.Join(out, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
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
