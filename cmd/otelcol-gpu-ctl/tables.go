package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printStatus(p *printer, s consoleclient.Status) {
	tw := table(p.w)
	fmt.Fprintf(tw, "version\t%s %s\n", dash(s.Command), dash(s.Version))
	fmt.Fprintf(tw, "remediation\t%s\n", map[bool]string{true: "attached", false: "not attached (no remediation exporter)"}[s.ControllerAttached])
	if s.Role != "" {
		role := s.Role
		switch {
		case s.Role == consoleclient.RoleOwner:
			role += ": this replica acts"
		case s.Owner != nil && s.Owner.Console != "":
			role += ": " + s.Owner.Name + " acts, its console " + s.Owner.Console
		case s.Owner != nil:
			role += ": " + s.Owner.Name + " acts"
		}
		fmt.Fprintf(tw, "role\t%s (election %s)\n", role, dash(s.Election))
		if s.Self != nil {
			fmt.Fprintf(tw, "replica\t%s\n", s.Self.Name)
		}
	}
	fmt.Fprintf(tw, "faults\t%d open, %d resolved, %d acknowledged\n", s.OpenFaults, s.ResolvedFaults, s.AcknowledgedFaults)
	fmt.Fprintf(tw, "jobs\t%d\n", s.Jobs)
	fmt.Fprintf(tw, "forgotten\t%d faults, %d jobs, %d steps dropped\n", s.EvictedFaults, s.EvictedJobs, s.DroppedSteps)
	_ = tw.Flush()
}

func rank(r int64) string {
	if r < 0 {
		return "-"
	}
	return strconv.FormatInt(r, 10)
}

func printFaults(p *printer, fs []consoleclient.Fault) {
	if len(fs) == 0 {
		fmt.Fprintln(p.w, "no faults")
		return
	}
	tw := table(p.w)
	fmt.Fprintln(tw, "SEVERITY\tTYPE\tNODE\tGPU\tJOB\tRANK\tFIRST SEEN\tSTATE\tDECISION\tACTION\tACK\tID")
	for _, f := range fs {
		ack := "-"
		if f.Ack != nil {
			ack = f.Ack.By
		}
		job := f.Job
		if job != "" && f.Attempt != 0 {
			job += "#" + strconv.FormatInt(f.Attempt, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Severity, f.Type, dash(f.Node), dash(f.GPU), dash(job),
			rank(f.Rank), fmtTime(f.FirstSeen), f.State, dash(f.Decision), dash(f.Action), ack, f.ID)
	}
	_ = tw.Flush()
}

func printFault(p *printer, f consoleclient.Fault) {
	tw := table(p.w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, dash(v)) }
	row("id", f.ID)
	row("type", f.Type)
	row("severity", f.Severity)
	row("state", f.State)
	row("node", f.Node)
	row("gpu", f.GPU)
	row("job", f.Job)
	row("attempt", strconv.FormatInt(f.Attempt, 10))
	row("rank", rank(f.Rank))
	row("step", rank(f.Step))
	row("first seen", fmtTime(f.FirstSeen))
	row("last seen", fmtTime(f.LastSeen))
	row("summary", f.Summary)
	row("decision", f.Decision)
	row("action", f.Action)
	row("reason", f.Reason)
	row("trace id", f.TraceID)
	row("trace", f.Links.Trace)
	row("logs", f.Links.Logs)
	if f.Ack != nil {
		row("acknowledged", fmt.Sprintf("by %s at %s: %s", f.Ack.By, fmtTime(f.Ack.Time), dash(f.Ack.Reason)))
	} else {
		row("acknowledged", "")
	}
	keys := make([]string, 0, len(f.Evidence))
	for k := range f.Evidence {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		row("evidence."+k, f.Evidence[k])
	}
	_ = tw.Flush()
}

func printNodes(p *printer, ns []consoleclient.Node) {
	if len(ns) == 0 {
		fmt.Fprintln(p.w, "no quarantined nodes")
		return
	}
	if anyLifecycle(ns) {
		printNodesLifecycle(p, ns)
		return
	}
	tw := table(p.w)
	fmt.Fprintln(tw, "NODE\tSINCE\tFAULTS\tACTIONS\tRELEASE PENDING\tREASON")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\n", n.Node, fmtTime(n.Since), dash(strings.Join(n.FaultIDs, ",")),
			dash(strings.Join(n.Actions, ",")), n.ReleasePending, dash(n.Reason))
	}
	_ = tw.Flush()
}

func printBreaker(p *printer, b consoleclient.Breaker) {
	budget := "?"
	if b.Budget > 0 {
		budget = strconv.Itoa(b.Budget)
	}
	fmt.Fprintf(p.w, "state: %s\nquarantines: %d of %s within %s\n", b.State, b.Used, budget, b.Window)
	printQuarantineCap(p, b.QuarantineCap)
	if len(b.History) == 0 {
		return
	}
	tw := table(p.w)
	fmt.Fprintln(tw, "TIME\tEVENT\tBY\tREASON")
	for _, e := range b.History {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", fmtTime(e.Time), e.Event, dash(e.By), dash(e.Reason))
	}
	_ = tw.Flush()
}

func printJobs(p *printer, js []consoleclient.Job) {
	if len(js) == 0 {
		fmt.Fprintln(p.w, "no jobs")
		return
	}
	tw := table(p.w)
	fmt.Fprintln(tw, "JOB\tATTEMPT\tRANKS\tSTEPS\tSTRAGGLER RANKS\tUPDATED")
	for _, j := range js {
		var s []string
		for _, r := range j.Stragglers {
			s = append(s, fmt.Sprintf("%d(%d)", r.Rank, r.Steps))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d-%d (%d)\t%s\t%s\n", j.Job, j.Attempt, j.Ranks, j.FirstStep, j.LastStep, j.Steps,
			dash(strings.Join(s, ",")), fmtTime(j.Updated))
	}
	_ = tw.Flush()
}

// shades are the heatmap's characters: missing, then compute / the step's
// median up to 1.05, 1.25, 1.5, above; verdict marks a straggler cell.
type shades struct {
	missing string
	levels  [4]string
	verdict string
}

var (
	unicodeShades = shades{missing: "·", levels: [4]string{"░", "▒", "▓", "█"}, verdict: "◆"}
	asciiShades   = shades{missing: ".", levels: [4]string{"-", "+", "*", "#"}, verdict: "X"}
)

// maxRanksShown bounds the rows of a heatmap without --all-ranks.
const maxRanksShown = 256

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

func printHeatmap(p *printer, h consoleclient.Heatmap) {
	sh := unicodeShades
	if p.ascii {
		sh = asciiShades
	}
	fmt.Fprintf(p.w, "job %s attempt %d: %d ranks x %d steps", h.Job, h.Attempt, len(h.Ranks), len(h.Steps))
	if len(h.Steps) > 0 {
		fmt.Fprintf(p.w, " (steps %d-%d)", h.Steps[0], h.Steps[len(h.Steps)-1])
	}
	fmt.Fprintln(p.w)
	medians := make([]float64, len(h.Steps))
	for s := range h.Steps {
		var xs []float64
		for r := range h.Ranks {
			if v := h.ComputeMS[r][s]; v != nil {
				xs = append(xs, *v)
			}
		}
		medians[s] = median(xs)
	}
	verdicts := map[[2]int64]bool{}
	flagged := map[int64]bool{}
	for _, v := range h.Verdicts {
		verdicts[[2]int64{v.Rank, v.Step}] = true
		flagged[v.Rank] = true
	}
	width := len("rank ") + len(strconv.FormatInt(maxInt(h.Ranks), 10))
	omitted := 0
	for r, rk := range h.Ranks {
		if !p.allRanks && len(h.Ranks) > maxRanksShown && !flagged[rk] {
			omitted++
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%-*s ", width, "rank "+strconv.FormatInt(rk, 10))
		for s, st := range h.Steps {
			v := h.ComputeMS[r][s]
			switch {
			case verdicts[[2]int64{rk, st}]:
				b.WriteString(sh.verdict)
			case v == nil || math.IsNaN(medians[s]) || medians[s] <= 0:
				b.WriteString(sh.missing)
			default:
				ratio := *v / medians[s]
				switch {
				case ratio <= 1.05:
					b.WriteString(sh.levels[0])
				case ratio <= 1.25:
					b.WriteString(sh.levels[1])
				case ratio <= 1.5:
					b.WriteString(sh.levels[2])
				default:
					b.WriteString(sh.levels[3])
				}
			}
		}
		if flagged[rk] {
			node := ""
			if r < len(h.Nodes) && h.Nodes[r] != "" {
				node = " " + h.Nodes[r]
			}
			b.WriteString("  straggler" + node)
		}
		fmt.Fprintln(p.w, b.String())
	}
	if omitted > 0 {
		fmt.Fprintf(p.w, "(%d ranks without a verdict not shown: --all-ranks shows them)\n", omitted)
	}
	fmt.Fprintf(p.w, "legend: compute / step median %s <=1.05 %s <=1.25 %s <=1.5 %s >1.5  %s missing  %s straggler verdict\n",
		sh.levels[0], sh.levels[1], sh.levels[2], sh.levels[3], sh.missing, sh.verdict)
}

func maxInt(xs []int64) int64 {
	var m int64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
