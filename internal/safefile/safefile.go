// Package safefile opens files that untrusted writers control (a directory
// a training pod can write: flight-recorder dumps, NCCL inspector files)
// without following symlinks and without blocking, and decides on the open
// file descriptor whether it is a regular file: there is no window between
// a check and the open for a writer to swap the file.
//
// Open uses O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC, then fstat:
//   - a symlink as the last path element fails at open (ELOOP): ErrSymlink;
//   - a FIFO opens at once (O_NONBLOCK) instead of waiting for a writer, and
//     is refused like a device, socket or directory: ErrNotRegular.
//
// O_NONBLOCK has no effect on reads of regular files.
package safefile // import "github.com/otelcol-gpu/otelcol-gpu/internal/safefile"

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

var (
	// ErrSymlink is returned for a path whose last element is a symlink.
	ErrSymlink = errors.New("is a symlink (refused)")
	// ErrNotRegular is returned for a FIFO, device, socket or directory.
	ErrNotRegular = errors.New("is not a regular file (refused)")
)

// Reasons of a refusal, for the reason attribute of a counter.
const (
	ReasonSymlink    = "symlink"
	ReasonNotRegular = "not_regular"
)

// Reason returns ReasonSymlink or ReasonNotRegular for a refusal by Open,
// "" for any other error.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrSymlink):
		return ReasonSymlink
	case errors.Is(err, ErrNotRegular):
		return ReasonNotRegular
	}
	return ""
}

// Open opens path for reading if it is a regular file, and returns the file
// with its fstat information. Errors are *fs.PathError values naming path;
// a refusal wraps ErrSymlink or ErrNotRegular.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := openNoFollow(path)
	if err != nil {
		if isLoop(err) {
			return nil, nil, &fs.PathError{Op: "open", Path: path, Err: ErrSymlink}
		}
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, kind(info.Mode()))}
	}
	return f, info, nil
}

// Check says whether info (from os.Lstat or a directory entry's Info)
// describes a file Open would refuse, with the same errors.
func Check(path string, mode fs.FileMode) error {
	switch {
	case mode&fs.ModeSymlink != 0:
		return &fs.PathError{Op: "open", Path: path, Err: ErrSymlink}
	case !mode.IsRegular():
		return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, kind(mode))}
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "irregular file"
}
