package invariant

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// outcome is what one case did.
type outcome struct {
	faults   []fault.Record
	refused  int // requests refused whole
	dropped  int // records refused
	rejected map[string]int64
}

// runCase sends reqs to a fresh agent, hands what it wrote to Kafka to a
// fresh gateway, and checks the invariant: every answer and every count as
// the canonical form says, no hardware signal name past provenance, no
// fault record about another node or GPU.
func runCase(reqs []request, base time.Time) (outcome, error) {
	var out outcome
	w, err := newWorld()
	if err != nil {
		return out, err
	}
	defer func() { _ = w.shutdown() }()
	if err := w.scrapeOwnGPUs(base.Add(-time.Second)); err != nil {
		return out, err
	}
	var errs []error
	want := expectation{}
	for i, r := range reqs {
		if r.own {
			if err := w.send(r); err != nil {
				errs = append(errs, fmt.Errorf("request %d (the agent's own): %w", i, err))
			}
			continue
		}
		e := r.expect()
		if err := checkAnswer(e, w.send(r)); err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
		if e.refuse {
			out.refused++
		}
		want.refused += e.refused
		want.kept += e.kept
	}
	if err := w.finishAgent(); err != nil {
		errs = append(errs, fmt.Errorf("running the pipelines: %w", err))
	}
	rejected, err := w.rejected()
	if err != nil {
		return out, err
	}
	out.rejected = rejected
	out.dropped = int(rejected["repeated_key"] + rejected["too_deep"])
	if out.dropped != want.refused {
		errs = append(errs, fmt.Errorf("the agent counted %d refused records (%v), the canonical form refuses %d", out.dropped, rejected, want.refused))
	}
	if got := tapRecords(w.tap); got != want.kept {
		errs = append(errs, fmt.Errorf("the provenance processor passed %d records on, the canonical form keeps %d", got, want.kept))
	}
	if err := checkNoHardwareNames(w.tap); err != nil {
		errs = append(errs, err)
	}
	for _, ld := range w.faults.AllLogs() {
		records, bad := fault.FromLogs(ld)
		errs = append(errs, bad...)
		out.faults = append(out.faults, records...)
	}
	if err := checkFaults(out.faults); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// seededCase is the case of a seed, and the choices that made it (a fuzz
// seed that makes the same case).
func seededCase(seed uint64, base time.Time) ([]request, []byte) {
	c := &randChooser{r: rand.New(rand.NewPCG(seed, 29))}
	g := &gen{c: c, base: base}
	return g.attack(), c.rec
}

// invariantCases is how many seeded cases TestInvariant runs:
// INVARIANT_CASES, else 120 (a few seconds; under -race a few times that).
func invariantCases(t *testing.T) int {
	if s := os.Getenv("INVARIANT_CASES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("INVARIANT_CASES=%q: want a positive number", s)
		}
		return n
	}
	return 120
}

// The invariant over seeded cases of the grammar. The cases must also
// exercise it: some requests refused whole, some records refused, and
// faults opened (about this node: a fake job's slow rank).
func TestInvariant(t *testing.T) {
	n := invariantCases(t)
	var refused, dropped, faults, straggler int
	for seed := range uint64(n) {
		reqs, _ := seededCase(seed, time.Now())
		out, err := runCase(reqs, time.Now())
		if err != nil {
			t.Errorf("seed %d (%d requests): %v", seed, len(reqs), err)
			continue
		}
		refused += out.refused
		dropped += out.dropped
		faults += len(out.faults)
		for _, r := range out.faults {
			if r.Type == fault.TypeStragglerCompute && r.State == fault.StateOpen {
				straggler++
			}
		}
	}
	t.Logf("%d cases: %d requests refused whole, %d records refused, %d fault records (%d straggler faults opened) in the cases that held",
		n, refused, dropped, faults, straggler)
	if refused == 0 || dropped == 0 || straggler == 0 {
		t.Errorf("the cases did not exercise the invariant: %d requests refused, %d records refused, %d straggler faults", refused, dropped, straggler)
	}
}

// FuzzInvariant: the fuzzer's bytes choose the case (make fuzz-invariant).
func FuzzInvariant(f *testing.F) {
	for seed := range uint64(8) {
		_, rec := seededCase(seed, time.Now())
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &gen{c: &bytesChooser{b: b}, base: time.Now()}
		if _, err := runCase(g.attack(), g.base); err != nil {
			t.Fatal(err)
		}
	})
}
