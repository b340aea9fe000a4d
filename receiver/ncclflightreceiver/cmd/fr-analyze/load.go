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
	dir     string // the directory holding it
	rank    int
	form    string // pickle | json
	mtime   int64  // the file's, ns; used only with --use-mtime
	version string // the dump's schema version
	// newest and oldest are the dump's own times: the newest of its
	// entries' time_created_ns and watchdog times, the oldest
	// time_created_ns; 0 when it has no entries.
	newest, oldest int64
	// world is the job's size as the dump's pg_config tells it (the
	// largest member rank + 1); 0 when the dump names no group.
	world   int
	records *analysis.Rank
}

// timed reports whether the dump's entries give it a time.
func (in *input) timed() bool { return in.newest > 0 }

// fileProblem is a file that did not take part in the analysis, and why.
// Reason is short and the same for every file of one cause (the text
// output counts files by it); Detail, when set, is this file's.
type fileProblem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Reasons for skipping a file.
const (
	reasonNotDump   = "not a flight recorder dump"
	reasonDuplicate = "another dump of the same rank and incident is used"
)

// loaded is what reading the paths gave: every dump, before they are
// grouped into incidents (incidents.go).
type loaded struct {
	inputs   []input
	warnings []fileProblem // parsed with a warning (unknown version, missing fields, ...)
	skipped  []fileProblem // not dumps met in a directory, or a rank's other dumps
	errors   []fileProblem // named on the command line or a dump that cannot be read
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
func load(paths []string, maxFileSize int64) *loaded {
	l := &loaded{}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			l.errors = append(l.errors, fileProblem{Path: p, Reason: err.Error()})
			continue
		}
		if !info.IsDir() {
			l.read(p, true, maxFileSize)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				l.errors = append(l.errors, fileProblem{Path: path, Reason: err.Error()})
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
			l.read(path, false, maxFileSize)
			return nil
		})
		if err != nil {
			l.errors = append(l.errors, fileProblem{Path: p, Reason: err.Error()})
		}
	}
	sort.SliceStable(l.inputs, func(i, j int) bool { return l.inputs[i].path < l.inputs[j].path })
	for _, s := range [][]fileProblem{l.warnings, l.skipped, l.errors} {
		sort.SliceStable(s, func(i, j int) bool { return s[i].Path < s[j].Path })
	}
	return l
}

// read decodes one file. named: the file was given on the command line, so
// not being a dump is an error.
func (l *loaded) read(path string, named bool, maxFileSize int64) {
	data, info, err := readFile(path, maxFileSize)
	if err != nil {
		l.errors = append(l.errors, fileProblem{Path: path, Reason: err.Error()})
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
			l.skipped = append(l.skipped, fileProblem{Path: path, Reason: reasonNotDump})
			return
		}
		l.errors = append(l.errors, fileProblem{Path: path, Reason: err.Error()})
		return
	}
	for _, w := range warnings {
		l.warnings = append(l.warnings, fileProblem{Path: path, Reason: w.Message})
	}
	rank := rankOf(path)
	if rank < 0 {
		l.errors = append(l.errors, fileProblem{Path: path, Reason: "cannot tell the rank: the file name does not end in the rank's digits (torch writes <prefix><rank>); rename it, e.g. rank_<N>"})
		return
	}
	form := "pickle"
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		form = "json"
	}
	records, err := b.Finish(dump)
	if err != nil { // no Limit: never
		l.errors = append(l.errors, fileProblem{Path: path, Reason: err.Error()})
		return
	}
	records.Rank = rank
	in := input{
		path: path, dir: filepath.Dir(path), rank: rank, form: form, mtime: info.ModTime().UnixNano(),
		version: dump.Version.Raw, world: worldOf(records.PGConfig), records: records,
	}
	in.newest, in.oldest = entryTimes(records)
	l.inputs = append(l.inputs, in)
}

// entryTimes is the newest time a dump's entries hold (enqueued, or seen
// started or completed by the watchdog) and the oldest enqueue: the dump's
// own clock, which a copy does not change.
func entryTimes(r *analysis.Rank) (newest, oldest int64) {
	for i := range r.Ops {
		op := &r.Ops[i]
		newest = max(newest, op.TimeCreatedNs, op.TimeDiscoveredStartedNs, op.TimeDiscoveredCompletedNs)
		if t := op.TimeCreatedNs; t > 0 && (oldest == 0 || t < oldest) {
			oldest = t
		}
	}
	return newest, oldest
}

// worldOf is the job's size as a dump's pg_config shows it: the largest
// member rank of any group + 1 (the default group holds them all); 0 when
// no group lists its ranks.
func worldOf(cfg map[string]frdump.PGConfig) int {
	w := 0
	for _, g := range cfg {
		for _, r := range g.Ranks {
			w = max(w, r+1)
		}
	}
	return w
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

func sortProblems(ps []fileProblem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Path < ps[j].Path })
}
