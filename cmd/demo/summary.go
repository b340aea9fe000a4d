package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// summary prints what the run found and where its output is, and returns
// how many expected faults never opened.
func (d *demo) summary(runErr error) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.term
	fmt.Fprintln(w)
	fmt.Fprintln(w, "==== summary ====")
	interrupted := errors.Is(runErr, context.Canceled)
	switch {
	case interrupted:
		fmt.Fprintln(w, "interrupted: every process stopped")
	case runErr != nil:
		fmt.Fprintf(w, "run stopped early: %v\n", runErr)
	}
	missing := len(d.scenario.Expect)
	if d.cluster != nil {
		rep := d.cluster.Score(d.records, d.arrivals)
		missing = 0
		fmt.Fprintf(w, "seed %d (rerun: -seed %d), %d steps of %d done, %d step records handed to the Python module, %d fault records (%d faults opened), %d remediation decisions (+%d skipped duplicates)\n",
			d.cluster.Seed(), d.cluster.Seed(), d.lastStep+1, d.scenario.Steps, d.spans, len(d.records), len(d.opened), len(d.decisions), d.skipped)
		if d.pySummary != nil {
			fmt.Fprintln(w, d.pythonLine(d.spans))
		}
		if len(rep.Scenarios) == 1 {
			s := rep.Scenarios[0]
			for i, e := range d.scenario.Expect {
				what := fmt.Sprintf("%s on %s", e.Type, d.expectedWhere(e))
				if i < len(s.Found) && s.Found[i] >= 0 {
					fmt.Fprintf(w, "  FOUND   %-60s %s\n", what, d.firstOpen(e))
				} else {
					missing++
					fmt.Fprintf(w, "  MISSED  %s\n", what)
				}
			}
			for _, other := range d.otherOpened(s.FalsePositives) {
				fmt.Fprintf(w, "  also    %s (a consequence scenario.yaml allows)\n", other)
			}
			for _, fp := range s.FalsePositives {
				fmt.Fprintf(w, "  UNEXPECTED  %s\n", fp)
			}
		}
		for _, u := range rep.Unattributed {
			fmt.Fprintf(w, "  unattributed: %s\n", u)
		}
		if f, err := os.Create(filepath.Join(d.outDir, "score.md")); err == nil {
			rep.Write(f)
			f.Close()
		}
	}
	if d.repairOn() {
		writeRecovery(w, repairLoops(d.repairs), d.metrics, d.metricsErr)
	}
	if d.updates > 0 {
		fmt.Fprintf(w, "%d update records that changed neither severity nor action were not printed (-all-updates prints them)\n", d.updates)
	}
	if len(d.problems) > 0 {
		fmt.Fprintf(w, "%d problems reading the outputs (first: %s)\n", len(d.problems), d.problems[0])
	}
	fmt.Fprintf(w, "output in %s:\n", d.outDir)
	fmt.Fprintf(w, "  logs/                    one log per process (kfakebroker, gateway, agent-<node>, python-<node>)\n")
	fmt.Fprintf(w, "  faults.jsonl             every fault record read from gpu_faults, one JSON object a line\n")
	fmt.Fprintf(w, "  remediation-audit.jsonl  the remediation exporter's decisions and repair loop steps (dry run)\n")
	if d.repairOn() {
		fmt.Fprintf(w, "  gateway-metrics.prom     the gateway's telemetry page at the end of the run (repair loop histograms)\n")
	}
	fmt.Fprintf(w, "  score.md                 the testbed's score of the records against scenario.yaml\n")
	fmt.Fprintf(w, "  sim/                     the simulated inputs: sysfs trees, flight-recorder dumps\n")
	if missing > 0 && !interrupted {
		fmt.Fprintf(w, "FAIL: %d expected fault(s) never opened\n", missing)
	} else if runErr == nil {
		fmt.Fprintln(w, "OK: every injected fault was detected")
	}
	return missing
}

// otherOpened lists the faults opened that no expectation names, less the
// false positives (those no allowance covers either; "type kind:key").
func (d *demo) otherOpened(falsePositives []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range d.records {
		if r.State != fault.StateOpen || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		p := d.topo.locate(r)
		expected := false
		for _, e := range d.scenario.Expect {
			expected = expected || (r.Type == e.Type && (e.Node == nil || p.node == *e.Node) && (e.GPU == nil || p.gpu == *e.GPU))
		}
		if !expected && !slices.Contains(falsePositives, string(r.Type)+" "+r.Entity.String()) {
			out = append(out, fmt.Sprintf("%s on %s, fault %s", r.Type, r.Entity, r.ID))
		}
	}
	return out
}

func (d *demo) expectedWhere(e testbed.Expectation) string {
	switch {
	case e.Node != nil && e.GPU != nil:
		return d.where(*e.Node, *e.GPU)
	case e.Node != nil:
		return "node " + d.host(*e.Node)
	}
	return e.Entity
}

// firstOpen describes the first open record of the expected fault type
// on the expected GPU or node, and how long after its injection it came.
func (d *demo) firstOpen(e testbed.Expectation) string {
	for i, r := range d.records {
		if r.State != fault.StateOpen || r.Type != e.Type {
			continue
		}
		p := d.topo.locate(r)
		if (e.Node != nil && p.node != *e.Node) || (e.GPU != nil && p.gpu != *e.GPU) {
			continue
		}
		decisions := 0
		for _, dec := range d.decisions {
			if dec.FaultID == r.ID {
				decisions++
			}
		}
		return fmt.Sprintf("fault %s, onset%s, %d decision(s)", r.ID, d.onsetFor(p, d.arrivals[i]), decisions)
	}
	return ""
}
