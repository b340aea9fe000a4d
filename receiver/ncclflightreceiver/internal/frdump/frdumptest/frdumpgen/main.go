// Command frdumpgen writes one flight recorder dump for the end-to-end
// tests (test/e2e), which cannot import this receiver's internal packages:
// a synthetic honest dump (frdumptest.Synthetic, as torch's pickler writes
// it), issue 19's pickle memo bomb (pickletest.MemoBomb), or issue 20's
// Megatron mixture-of-experts job (frdumptest.MegatronMoE: 16 files
// _dump_<rank>, each file's mtime the moment its rank dumped).
//
//	frdumpgen -out FILE [-rank N] [-world N] [-entries N]  synthetic pickle
//	frdumpgen -out FILE -memo-bomb [-entries N] [-items N]  memo bomb
//	frdumpgen -moe healthy|gpu_error|gil_hang -dir DIR [-seed N] [-culprits 4,5] [-shift D]
//
// -shift moves every time of the MoE job (enqueues and mtimes) by D from
// 2025-11-29T08:00:00Z, e.g. to now minus the incident's age.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "frdumpgen:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("frdumpgen", flag.ContinueOnError)
	out := fs.String("out", "", "file to write (required)")
	rank := fs.Int("rank", 0, "rank of the synthetic dump")
	world := fs.Int("world", 8, "ranks of the synthetic dump's job (its default process group)")
	entries := fs.Int("entries", 2000, "entries of the dump")
	bomb := fs.Bool("memo-bomb", false, "write the memo bomb instead of an honest dump")
	items := fs.Int("items", 1<<20-1, "items of the memo bomb's shared frames list")
	moe := fs.String("moe", "", "write the Megatron MoE job's 16 dumps in this scenario (healthy, gpu_error, gil_hang)")
	dir := fs.String("dir", "", "directory of the MoE dumps")
	seed := fs.Uint64("seed", 0, "seed of the MoE job")
	culprits := fs.String("culprits", "4,5", "ranks that stop in the MoE job, all of one pipeline stage")
	shift := fs.Duration("shift", 0, "added to every time of the MoE job")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *moe != "" {
		return writeMoE(*moe, *dir, *seed, *culprits, *shift, fs.NArg())
	}
	if *out == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: frdumpgen -out FILE [-rank N] [-world N] [-entries N] [-memo-bomb [-items N]]")
	}
	if *entries <= 0 || *items <= 0 || *rank < 0 || *world <= *rank {
		return fmt.Errorf("-entries %d, -items %d, -rank %d, -world %d: want positive counts and a rank of the world", *entries, *items, *rank, *world)
	}
	var data []byte
	if *bomb {
		data = pickletest.MemoBomb(*entries, *items)
	} else {
		data = frdumptest.Pickle(frdumptest.Synthetic(frdumptest.SyntheticConfig{Rank: *rank, WorldSize: *world, Entries: *entries}))
	}
	return os.WriteFile(*out, data, 0o644)
}

func writeMoE(scenario, dir string, seed uint64, culprits string, shift time.Duration, stray int) error {
	switch {
	case dir == "" || stray != 0:
		return fmt.Errorf("usage: frdumpgen -moe SCENARIO -dir DIR [-seed N] [-culprits 4,5] [-shift D]")
	case scenario != frdumptest.MoEHealthy && scenario != frdumptest.MoEGPUError && scenario != frdumptest.MoEGILHang:
		return fmt.Errorf("-moe %q: want %s, %s or %s", scenario, frdumptest.MoEHealthy, frdumptest.MoEGPUError, frdumptest.MoEGILHang)
	}
	var ranks []int
	stage := -1
	for _, f := range strings.Split(culprits, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r < 0 || r >= frdumptest.MoEWorld {
			return fmt.Errorf("-culprits %q: want ranks 0-%d", culprits, frdumptest.MoEWorld-1)
		}
		s := r / (frdumptest.MoEWorld / 2)
		if stage >= 0 && s != stage {
			return fmt.Errorf("-culprits %q: all of one pipeline stage (ranks 0-7 or 8-15)", culprits)
		}
		stage = s
		ranks = append(ranks, r)
	}
	cfg := frdumptest.MoEConfig{Scenario: scenario, Culprits: ranks, Seed: seed}
	cfg.T0Ns = 1764403200000000000 + shift.Nanoseconds()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for rank, d := range frdumptest.MegatronMoE(cfg) {
		path := filepath.Join(dir, frdumptest.MoEFileName(rank))
		if err := os.WriteFile(path, frdumptest.Pickle(d), 0o644); err != nil {
			return err
		}
		at := time.Unix(0, d.DumpedAtNs)
		if err := os.Chtimes(path, at, at); err != nil {
			return err
		}
	}
	return nil
}
