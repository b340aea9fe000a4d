package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// The repair loop in the nodes listing and in node NODE.

func anyLifecycle(ns []consoleclient.Node) bool {
	for _, n := range ns {
		if n.Lifecycle != nil {
			return true
		}
	}
	return false
}

// printNodesLifecycle is the nodes listing when a node carries a repair
// loop: where each node is (a node in rma is marked "rma!": it waits for
// a human), how long it has been there, the repair and its attempt, the
// last verification.
func printNodesLifecycle(p *printer, ns []consoleclient.Node) {
	tw := table(p.w)
	fmt.Fprintln(tw, "NODE\tSTEP\tIN STEP\tREPAIR\tLAST VERIFY\tSINCE\tFAULTS\tACTIONS\tRELEASE PENDING\tREASON")
	for _, n := range ns {
		step, inStep, rep, verify := "-", "-", "-", "-"
		if l := n.Lifecycle; l != nil {
			step, inStep, rep, verify = lifecycleStep(l), fmtAge(l.InStepSeconds), repairAttempt(l), lastVerify(l, false)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%t\t%s\n", n.Node, step, inStep, rep, verify, fmtTime(n.Since),
			dash(strings.Join(n.FaultIDs, ",")), dash(strings.Join(n.Actions, ",")), n.ReleasePending, dash(n.Reason))
	}
	_ = tw.Flush()
}

// printNode is one node with its repair loop's history.
func printNode(p *printer, n consoleclient.Node) {
	tw := table(p.w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, dash(v)) }
	row("node", n.Node)
	row("since", fmtTime(n.Since))
	row("faults", strings.Join(n.FaultIDs, ","))
	row("actions", strings.Join(n.Actions, ","))
	row("reason", n.Reason)
	row("release pending", strconv.FormatBool(n.ReleasePending))
	l := n.Lifecycle
	if l == nil {
		row("repair loop", "none (remediation runs no repair loop for this node)")
		_ = tw.Flush()
		return
	}
	step := l.Step
	if l.Alarm {
		step += " (ALARM: every repair failed, the node waits for a human)"
	}
	row("step", step)
	row("in step", fmtAge(l.InStepSeconds)+" (since "+fmtTime(l.Since)+")")
	row("repair", repairAttempt(l))
	row("last verify", lastVerify(l, true))
	_ = tw.Flush()

	fmt.Fprintln(p.w, "\nHISTORY")
	if len(l.History) == 0 {
		fmt.Fprintln(p.w, "no steps recorded")
	} else {
		tw = table(p.w)
		fmt.Fprintln(tw, "AT\tSTEP\tDETAIL")
		for _, h := range l.History {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", fmtTime(h.At), h.Step, dash(h.Detail))
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(p.w, "\nVERIFICATIONS")
	if len(l.Verifications) == 0 {
		fmt.Fprintln(p.w, "none yet")
		return
	}
	tw = table(p.w)
	fmt.Fprintln(tw, "AT\tCHECKS\tRESULT\tDETAIL")
	for _, v := range l.Verifications {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", fmtTime(v.At), dash(v.Checks), passed(v.Passed), dash(v.Detail))
	}
	_ = tw.Flush()
}

func lifecycleStep(l *consoleclient.Lifecycle) string {
	if l.Alarm {
		return dash(l.Step) + "!"
	}
	return dash(l.Step)
}

// repairAttempt is "gpu_reset#1" ("-" before the first repair).
func repairAttempt(l *consoleclient.Lifecycle) string {
	if l.Repair == "" {
		return "-"
	}
	return l.Repair + "#" + strconv.Itoa(l.Attempt)
}

func passed(ok bool) string {
	if ok {
		return "passed"
	}
	return "failed"
}

// lastVerify is the newest verification: "failed (dcgm_diag level 1)";
// long adds its time and detail.
func lastVerify(l *consoleclient.Lifecycle, long bool) string {
	v := l.LastVerification()
	if v == nil {
		return "-"
	}
	s := passed(v.Passed)
	if v.Checks != "" {
		s += " (" + v.Checks + ")"
	}
	if long {
		s += " at " + fmtTime(v.At)
		if v.Detail != "" {
			s += ": " + v.Detail
		}
	}
	return s
}

// fmtAge is a time in a step, to the second below an hour: 45s, 19m13s,
// 3h27m, 2d03h.
func fmtAge(sec float64) string {
	if math.IsNaN(sec) || sec < 0 {
		sec = 0
	}
	d := time.Duration(math.Min(sec, float64(math.MaxInt64/int64(time.Second)))) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}
