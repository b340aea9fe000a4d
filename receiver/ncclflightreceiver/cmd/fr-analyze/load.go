package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// input is one dump read and decoded into what the analysis keeps of it
// (analysis.Rank: some 100 bytes an entry, not the dump's kilobytes), so
// that the dumps of a large job fit in memory together.
type input struct {
	path    string
	rank    int
	form    string // pickle | json
	mtime   int64  // the file's, ns
	version string // the dump's schema version
	records *analysis.Rank
}

// fileProblem is a file that did not take part in the analysis, and why.
type fileProblem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// loaded is what reading the paths gave.
type loaded struct {
	dumps    []input       // one per rank, ascending rank
	warnings []fileProblem // parsed with a warning (unknown version, missing fields, ...)
	skipped  []fileProblem // not dumps met in a directory, or a rank's other dumps
	errors   []fileProblem // named on the command line or a dump that cannot be read

	ignoreMtime bool // leave DumpedAtNs unset
}

// trailingDigits is the rank at the end of a dump's name, as the receiver
// reads it (torch writes <TORCH_FR_DUMP_TEMP_FILE><rank>).
var trailingDigits = regexp.MustCompile(`(\d+)$`)

// rankOf is the rank a dump's file name gives, -1 when none.
func rankOf(path string) int {
	base := filepath.Base(path)
	// The same dump saved as JSON (nccl_trace_rank_3.json) is the same rank.
	if ext := filepath.Ext(base); ext == ".json" || ext == ".pkl" || ext == ".pickle" {
		base = strings.TrimSuffix(base, ext)
	}
	n, err := strconv.Atoi(trailingDigits.FindString(base))
	if err != nil {
		return -1
	}
	return n
}

// load reads every dump the paths name. A directory is searched
// recursively; a file in it that is not a flight recorder dump at all is
// skipped (copies of node directories hold logs too), while one named on
// the command line, or one that looks like a dump and does not decode, is an
// error. Every error names its file, and the other files are still read.
func load(paths []string, maxFileSize int64, ignoreMtime bool) *loaded {
	l := &loaded{ignoreMtime: ignoreMtime}
	byRank := map[int]input{}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			l.errors = append(l.errors, fileProblem{p, err.Error()})
			continue
		}
		if !info.IsDir() {
			l.read(byRank, p, true, maxFileSize)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				l.errors = append(l.errors, fileProblem{path, err.Error()})
				return nil // the rest of the tree is still read
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir // .git and the like
				}
				return nil
			}
			if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
				return nil // sockets, FIFOs: never a dump, and a FIFO would block
			}
			l.read(byRank, path, false, maxFileSize)
			return nil
		})
		if err != nil {
			l.errors = append(l.errors, fileProblem{p, err.Error()})
		}
	}
	for _, in := range byRank {
		l.dumps = append(l.dumps, in)
	}
	sort.Slice(l.dumps, func(i, j int) bool { return l.dumps[i].rank < l.dumps[j].rank })
	for _, s := range [][]fileProblem{l.warnings, l.skipped, l.errors} {
		sort.SliceStable(s, func(i, j int) bool { return s[i].Path < s[j].Path })
	}
	return l
}

// read decodes one file into byRank. named: the file was given on the
// command line, so not being a dump is an error.
func (l *loaded) read(byRank map[int]input, path string, named bool, maxFileSize int64) {
	data, info, err := readFile(path, maxFileSize)
	if err != nil {
		l.errors = append(l.errors, fileProblem{path, err.Error()})
		return
	}
	b := analysis.NewBuilder(-1, 0)
	dump, warnings, err := frdump.ParseWithOptions(data, frdump.Options{Entry: func(i, n int, e *frdump.Entry) error {
		if i == 0 && n > 0 {
			_ = b.Grow(n) // no Limit: never fails
		}
		return b.Add(e)
	}})
	if err != nil {
		if errors.Is(err, frdump.ErrUnknownFormat) && !named {
			l.skipped = append(l.skipped, fileProblem{path, "not a flight recorder dump"})
			return
		}
		l.errors = append(l.errors, fileProblem{path, err.Error()})
		return
	}
	for _, w := range warnings {
		l.warnings = append(l.warnings, fileProblem{path, w.Message})
	}
	rank := rankOf(path)
	if rank < 0 {
		l.errors = append(l.errors, fileProblem{path, "cannot tell the rank: the file name does not end in the rank's digits (torch writes <prefix><rank>); rename it, e.g. rank_<N>"})
		return
	}
	// The dump's moment, on its node's clock, tells a rank that stopped
	// from one dumped earlier (the receiver reads it the same way). A copy
	// that did not keep mtimes (cp without -p) makes every rank look
	// stopped: --ignore-mtime.
	if !l.ignoreMtime {
		dump.DumpedAtNs = info.ModTime().UnixNano()
	}
	form := "pickle"
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		form = "json"
	}
	records, err := b.Finish(dump)
	if err != nil { // no Limit: never
		l.errors = append(l.errors, fileProblem{path, err.Error()})
		return
	}
	records.Rank = rank
	in := input{path: path, rank: rank, form: form, mtime: info.ModTime().UnixNano(), version: dump.Version.Raw, records: records}
	prev, dup := byRank[rank]
	if !dup {
		byRank[rank] = in
		return
	}
	keep, drop := prev, in
	if better(in, prev) {
		keep, drop = in, prev
	}
	byRank[rank] = keep
	l.skipped = append(l.skipped, fileProblem{drop.path, fmt.Sprintf("rank %d is also in %s, which is used (a pickle holds the Python stacks; else the newest)", rank, keep.path)})
}

// better reports whether a is the dump to analyse rather than b, both of one
// rank: the pickle (JSON dumps hold no Python stacks), else the newer.
func better(a, b input) bool {
	if a.form != b.form {
		return a.form == "pickle"
	}
	if a.mtime != b.mtime {
		return a.mtime > b.mtime
	}
	return a.path > b.path // deterministic
}

// readFile reads a file of at most maxSize bytes; a larger one is refused
// before it is read, as the receiver refuses it.
func readFile(path string, maxSize int64) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	if info.Size() > maxSize {
		return nil, nil, fmt.Errorf("%d bytes, over --max-file-size %d (the receiver's flight_recorder::max_file_size); raise it to read this dump", info.Size(), maxSize)
	}
	data := make([]byte, info.Size())
	n, err := f.ReadAt(data, 0)
	if err != nil && n != len(data) {
		return nil, nil, err
	}
	return data[:n], info, nil
}
