// Command frdumpgen writes one flight recorder dump for the end-to-end
// tests (test/e2e), which cannot import this receiver's internal packages:
// a synthetic honest dump (frdumptest.Synthetic, as torch's pickler writes
// it) or issue 19's pickle memo bomb (pickletest.MemoBomb).
//
//	frdumpgen -out FILE [-rank N] [-entries N]            synthetic pickle
//	frdumpgen -out FILE -memo-bomb [-entries N] [-items N]  memo bomb
package main

import (
	"flag"
	"fmt"
	"os"

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
	entries := fs.Int("entries", 2000, "entries of the dump")
	bomb := fs.Bool("memo-bomb", false, "write the memo bomb instead of an honest dump")
	items := fs.Int("items", 1<<20-1, "items of the memo bomb's shared frames list")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: frdumpgen -out FILE [-rank N] [-entries N] [-memo-bomb [-items N]]")
	}
	if *entries <= 0 || *items <= 0 || *rank < 0 {
		return fmt.Errorf("-entries %d, -items %d, -rank %d: want positive counts and a rank >= 0", *entries, *items, *rank)
	}
	var data []byte
	if *bomb {
		data = pickletest.MemoBomb(*entries, *items)
	} else {
		data = frdumptest.Pickle(frdumptest.Synthetic(frdumptest.SyntheticConfig{Rank: *rank, Entries: *entries}))
	}
	return os.WriteFile(*out, data, 0o644)
}
