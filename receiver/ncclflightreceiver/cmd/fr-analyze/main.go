// Command fr-analyze runs the ncclflight receiver's cross-rank analysis
// offline, over PyTorch NCCL flight recorder dumps copied off the nodes
// after an incident: the same package (internal/analysis) the receiver runs,
// on dumps decoded by the same parser (internal/frdump) within the same
// limits, so that what it prints is what a running collector would have
// reported for those dumps.
//
//	fr-analyze [--json] [-v] [--ranks 0-3,9] [--pg 72|EXPERT_MODEL_PARALLEL_GROUP]
//	           [--stall-after 1m] [--incident-gap 30m] [--use-mtime]
//	           [--max-file-size 12582912] PATH...
//
// PATH is a dump or a directory, searched recursively: pickle or JSON dumps,
// any file name prefix, any mix of ranks and nodes. A dump's rank is the
// trailing digits of its name, as torch names them (<prefix><rank>, with
// .json, .pkl or .pickle stripped).
//
// The dumps are grouped into incidents (incidents.go: one job's dumps of
// one moment) and each is analysed on its own; its first three lines give
// its answer: the incident, the analysis' first finding (ranks, process
// group, collective), the collective's sizes and dtypes.
//
// Time base: a rank's idle time is measured against the newest time the
// incident's dumps record (their entries' time_created_ns and the
// watchdog's times), never against the files' mtimes, which a copy
// changes; --use-mtime takes each file's mtime instead, as the receiver
// does on the node. --ignore-mtime, from before, is accepted and is now
// the default.
//
// Exit status: 0 when the dumps show no problem; 1 when they show one (a
// finding reported, after --ranks and --pg), whether or not some files
// could not be read; 2 on a usage error, when no dump could be read, or
// when some file could not be read and the others show no problem (the
// analysis is incomplete).
package main // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/cmd/fr-analyze"

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// Exit statuses.
const (
	exitClean    = 0
	exitFindings = 1
	exitError    = 2
)

// defaultIncidentGap: dumps whose newest entries lie further apart are of
// different incidents. The ranks of one hang stop within seconds to
// minutes of each other (the collective timeout bounds it); attempts and
// jobs lie further apart.
const defaultIncidentGap = 30 * time.Minute

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: fr-analyze [--json] [-v] [--ranks LIST] [--pg ID|DESC] [--stall-after DURATION]
                  [--incident-gap DURATION] [--use-mtime] [--max-file-size BYTES] PATH...

Analyses PyTorch NCCL flight recorder dumps across ranks, as the ncclflight
receiver does: the ranks a hang waits for, ranks missing from a collective,
mismatches, the straggler, timeouts, with each stuck rank's Python stack.

PATH is a dump (pickle or JSON) or a directory searched recursively; the
rank is the trailing digits of each file's name. A tree holding several
incidents (jobs, attempts, world sizes) is analysed per incident; the first
three lines of each give its answer.

Times come from the dumps themselves (their entries), not the files'
mtimes, so copies analyse the same; --use-mtime reads the mtimes instead.

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
	verbose := fs.Bool("v", false, "list every skipped file and warning, not only their counts")
	stallAfter := fs.Duration("stall-after", analysis.DefaultOptions().StallAfter,
		"a rank that enqueued nothing for this long before the incident's newest recorded time (the file's mtime with --use-mtime) counts as stopped; the receiver's flight_recorder::stall_after")
	incidentGap := fs.Duration("incident-gap", defaultIncidentGap,
		"dumps whose newest entries lie further apart than this are of different incidents")
	maxFileSize := fs.Int64("max-file-size", frdump.DefaultMaxJSONBytes,
		"refuse dumps larger than this many bytes; the receiver's flight_recorder::max_file_size")
	useMtime := fs.Bool("use-mtime", false,
		"take each file's mtime as its dump moment, as the receiver does on the node (only for files that kept the mtimes the ranks wrote)")
	ignoreMtime := fs.Bool("ignore-mtime", false,
		"the default now, accepted for compatibility: the dumps' own times, not the files' mtimes")
	ranksFlag := fs.String("ranks", "", "report only the findings that name one of these ranks, e.g. 0-3,9 (the analysis still reads every rank)")
	pgFlag := fs.String("pg", "", "report only the findings about this process group: its id (pg_config name, e.g. 72) or description (e.g. EXPERT_MODEL_PARALLEL_GROUP)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitClean
		}
		return exitError
	}
	usageErr := func(msg string) int {
		fmt.Fprintf(stderr, "fr-analyze: %s\n", msg)
		return exitError
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "fr-analyze: no dump or directory given")
		fs.Usage()
		return exitError
	}
	if *stallAfter <= 0 {
		return usageErr(fmt.Sprintf("--stall-after %s: must be greater than 0", *stallAfter))
	}
	if *incidentGap <= 0 {
		return usageErr(fmt.Sprintf("--incident-gap %s: must be greater than 0", *incidentGap))
	}
	if *maxFileSize <= 0 {
		return usageErr(fmt.Sprintf("--max-file-size %d: must be greater than 0", *maxFileSize))
	}
	if *useMtime && *ignoreMtime {
		return usageErr("--use-mtime and --ignore-mtime contradict each other: give one")
	}
	flt := filter{rankText: *ranksFlag, pg: strings.TrimSpace(*pgFlag)}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })
	if setFlags["ranks"] {
		r, err := parseRanks(*ranksFlag)
		if err != nil {
			return usageErr(err.Error())
		}
		flt.ranks = r
	}
	if setFlags["pg"] && flt.pg == "" {
		return usageErr(fmt.Sprintf("--pg %q: give a process group id (e.g. 72) or description (e.g. EXPERT_MODEL_PARALLEL_GROUP)", *pgFlag))
	}

	l := load(fs.Args(), *maxFileSize)
	incidents, dups := groupIncidents(l.inputs, *incidentGap)
	l.skipped = append(l.skipped, dups...)
	sortProblems(l.skipped)
	if len(incidents) > 0 {
		if err := flt.checkAgainst(incidents); err != nil {
			return usageErr(err.Error())
		}
	}
	opts := analysis.DefaultOptions()
	opts.StallAfter = *stallAfter
	res := analyze(l, incidents, opts, *useMtime, flt)

	var err error
	if *jsonOut {
		err = writeJSON(stdout, res)
	} else {
		err = writeText(stdout, res, flt, *verbose)
	}
	if err != nil {
		fmt.Fprintf(stderr, "fr-analyze: cannot write the result: %v\n", err)
		return exitError
	}
	return res.ExitStatus
}
