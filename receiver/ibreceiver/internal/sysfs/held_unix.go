//go:build unix

package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import (
	"io/fs"
	"syscall"
)

// pread reads h's held descriptor from offset 0 into the buffer in one
// system call: sysfs fills a read at offset 0 afresh (the attribute's show
// function runs again) and returns the whole value; a regular file returns
// what it has up to the buffer's size.
func (r *Reader) pread(h *heldFile) ([]byte, error) {
	for {
		n, err := syscall.Pread(int(h.fd), r.buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: h.path, Err: err}
		}
		if n == len(r.buf) {
			return nil, &fs.PathError{Op: "read", Path: h.path, Err: ErrTooLong}
		}
		return r.buf[:n], nil
	}
}

// fileID identifies a directory: a device directory removed and made
// again (a driver reload) is another one, whose files are opened anew.
type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}
}
