// Command fr-analyze runs the ncclflight receiver's cross-rank analysis
// offline, over PyTorch NCCL flight recorder dumps copied off the nodes
// after an incident: the same package (internal/analysis) the receiver runs,
// on dumps decoded by the same parser (internal/frdump) within the same
// limits, so that what it prints is what a running collector would have
// reported for those dumps.
//
//	fr-analyze [--json] [--stall-after 1m] [--max-file-size 12582912] [--ignore-mtime] PATH...
//
// PATH is a dump or a directory, searched recursively: pickle or JSON dumps,
// any file name prefix, any mix of ranks and nodes. A dump's rank is the
// trailing digits of its name, as torch names them (<prefix><rank>, with
// .json, .pkl or .pickle stripped); when one rank has several dumps, the
// pickle wins over JSON (it holds the Python stacks) and otherwise the newest.
//
// Exit status: 0 when the dumps show no problem; 1 when they show one (a
// finding), whether or not some files could not be read; 2 on a usage error,
// when no dump could be read, or when some file could not be read and the
// others show no problem (the analysis is incomplete).
package main // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/cmd/fr-analyze"

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// Exit statuses.
const (
	exitClean    = 0
	exitFindings = 1
	exitError    = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: fr-analyze [--json] [--stall-after DURATION] [--max-file-size BYTES] [--ignore-mtime] PATH...

Analyses PyTorch NCCL flight recorder dumps across ranks, as the ncclflight
receiver does: ranks missing from a collective, mismatches, the straggler,
the hang with each stuck rank's Python stack, timeouts.

PATH is a dump (pickle or JSON) or a directory searched recursively; the
rank is the trailing digits of each file's name.

Exit status: 0 no problem found; 1 problems found; 2 usage error, or files
that could not be read and no problem found in the others.

`

// run is the command without its process: testable.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fr-analyze", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	jsonOut := fs.Bool("json", false, "print the result as one JSON object (for tools)")
	stallAfter := fs.Duration("stall-after", analysis.DefaultOptions().StallAfter,
		"a rank that enqueued nothing for this long before its dump (the file's mtime) counts as stopped; the receiver's flight_recorder::stall_after")
	maxFileSize := fs.Int64("max-file-size", frdump.DefaultMaxJSONBytes,
		"refuse dumps larger than this many bytes; the receiver's flight_recorder::max_file_size")
	ignoreMtime := fs.Bool("ignore-mtime", false,
		"do not take the files' mtimes as the dump moments (copies that did not keep them): nothing is called stopped, the per-group findings are reported instead of one hang")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitClean
		}
		return exitError
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "fr-analyze: no dump or directory given")
		fs.Usage()
		return exitError
	}
	if *stallAfter <= 0 || *maxFileSize <= 0 {
		fmt.Fprintln(stderr, "fr-analyze: --stall-after and --max-file-size must be greater than 0")
		return exitError
	}

	in := load(fs.Args(), *maxFileSize, *ignoreMtime)
	opts := analysis.DefaultOptions()
	opts.StallAfter = *stallAfter
	res := analyze(in, opts)

	var err error
	if *jsonOut {
		err = writeJSON(stdout, res)
	} else {
		err = writeText(stdout, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "fr-analyze: cannot write the result: %v\n", err)
		return exitError
	}
	return res.ExitStatus
}
