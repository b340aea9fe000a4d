package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Placeholders of flight_recorder::job_path.
const (
	jobPlaceholder     = "{job}"
	attemptPlaceholder = "{attempt}"
	anySegment         = "*"
	// defaultJobPath matches the Slurm prolog and the Kubernetes guidance:
	// TORCH_FR_DUMP_TEMP_FILE=<dir>/<job>/<attempt>/rank_.
	defaultJobPath = jobPlaceholder + "/" + attemptPlaceholder
	// maxJobPathSegments bounds how deep the watcher follows directories.
	maxJobPathSegments = 8
	// maxJobIDLen bounds a job id read from a path: a directory name is
	// written by whoever can write the dump directory, and the id ends up
	// in every span, metric and finding key of the job.
	maxJobIDLen = 128
)

// reasonBadJobPath: a dump whose directories, read with
// flight_recorder::job_path, name no valid job or attempt.
const reasonBadJobPath = "bad_job_path"

// jobRef is the job and attempt a dump belongs to.
type jobRef struct {
	job     string
	attempt int64
	// fromPath: the path named them (else the agent's job_id, attempt 0
	// and no training.attempt attribute).
	fromPath bool
}

// jobPath is a parsed flight_recorder::job_path: one entry per directory
// level below a watched directory.
type jobPath struct {
	segments []string // {job}, {attempt}, * or a literal name
}

// parseJobPath checks a job_path template. Empty: dumps directly in the
// watched directories only, all of the agent's job_id.
func parseJobPath(tmpl string) (jobPath, error) {
	if tmpl == "" {
		return jobPath{}, nil
	}
	if !utf8.ValidString(tmpl) {
		return jobPath{}, errors.New("is not valid UTF-8")
	}
	if strings.HasPrefix(tmpl, "/") || strings.HasSuffix(tmpl, "/") {
		return jobPath{}, errors.New("must be relative to the watched directory, with no leading or trailing /")
	}
	segs := strings.Split(tmpl, "/")
	if len(segs) > maxJobPathSegments {
		return jobPath{}, fmt.Errorf("has %d directory levels, at most %d", len(segs), maxJobPathSegments)
	}
	jobs, attempts := 0, 0
	for _, s := range segs {
		switch s {
		case jobPlaceholder:
			jobs++
		case attemptPlaceholder:
			attempts++
		case "", ".", "..":
			return jobPath{}, fmt.Errorf("has the directory level %q; each level is {job}, {attempt}, * or a plain name", s)
		default:
			if strings.ContainsAny(s, "{}[]?\\") || (strings.Contains(s, "*") && s != anySegment) {
				return jobPath{}, fmt.Errorf("has the directory level %q; each level is exactly {job}, {attempt}, * or a plain name", s)
			}
		}
	}
	if jobs != 1 {
		return jobPath{}, fmt.Errorf("must name {job} exactly once, found %d", jobs)
	}
	if attempts > 1 {
		return jobPath{}, fmt.Errorf("must name {attempt} at most once, found %d", attempts)
	}
	return jobPath{segments: segs}, nil
}

// depth is how many directory levels below a watched directory hold dumps.
func (p jobPath) depth() int { return len(p.segments) }

// resolve returns the job of a dump at path below the watched directory
// root. A dump directly in root is the agent's (fallback); one at the
// template's depth is the job its directories name; any other is refused,
// as is a directory name that is no valid job id or attempt (bad_job_path).
// Errors quote no more than a bounded part of a name: the caller logs the
// path.
func (p jobPath) resolve(root, path, fallback string) (jobRef, error) {
	rel, err := filepath.Rel(root, filepath.Dir(path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return jobRef{}, fmt.Errorf("the dump is not below the watched directory %q", truncate(root))
	}
	if rel == "." {
		return jobRef{job: fallback}, nil
	}
	dirs := strings.Split(rel, string(filepath.Separator))
	if len(dirs) != len(p.segments) {
		return jobRef{}, fmt.Errorf("the dump is %d directories below %q; flight_recorder::job_path %q expects %d (or 0: the agent's job_id)",
			len(dirs), truncate(root), strings.Join(p.segments, "/"), len(p.segments))
	}
	ref := jobRef{fromPath: true}
	for i, s := range p.segments {
		d := dirs[i]
		switch s {
		case jobPlaceholder:
			if err := validJobID(d); err != nil {
				return jobRef{}, fmt.Errorf("the job directory %q %w", truncate(d), err)
			}
			ref.job = d
		case attemptPlaceholder:
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil || n < 0 || strconv.FormatInt(n, 10) != d {
				return jobRef{}, fmt.Errorf("the attempt directory %q is not a non-negative integer", truncate(d))
			}
			ref.attempt = n
		case anySegment:
		default:
			if d != s {
				return jobRef{}, fmt.Errorf("directory %q is not %q of flight_recorder::job_path", truncate(d), s)
			}
		}
	}
	return ref, nil
}

// validJobID refuses what a directory name can hold and a job id must
// not: non-UTF-8, control characters, absurd lengths, . and ..
func validJobID(s string) error {
	switch {
	case s == "" || s == "." || s == "..":
		return errors.New("is not a job id")
	case len(s) > maxJobIDLen:
		return fmt.Errorf("is %d bytes long, over %d", len(s), maxJobIDLen)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return errors.New("holds a control character")
		}
	}
	return nil
}

// truncate bounds a name quoted in a message.
func truncate(s string) string {
	const maxQuoted = 64
	if len(s) <= maxQuoted {
		return s
	}
	return s[:maxQuoted] + "…"
}
