//go:build !unix

package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import (
	"errors"
	"io"
	"io/fs"
)

// pread reads h's held descriptor from offset 0 (see held_unix.go).
func (r *Reader) pread(h *heldFile) ([]byte, error) {
	n, err := h.f.ReadAt(r.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n == len(r.buf) {
		return nil, &fs.PathError{Op: "read", Path: h.path, Err: ErrTooLong}
	}
	return r.buf[:n], nil
}

type fileID struct{}

func idOf(fs.FileInfo) fileID { return fileID{} }
