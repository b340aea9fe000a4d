//go:build linux

package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import (
	"encoding/binary"
	"io/fs"
	"syscall"
)

// lister lists one directory again and again into a reused buffer: while
// the names are those of its last listing, in the kernel's order (stable
// for an unchanged directory, in sysfs as on disk), it allocates nothing
// and says so (changed false).
type lister struct {
	buf []byte
	raw []string // the last listing, in the kernel's order
}

// list returns the names of dir (without "." and ".."), in the kernel's
// order, and whether they differ from the last listing. The slice is
// the lister's: read it, do not keep or change it. Errors are
// *fs.PathError values.
func (l *lister) list(dir string) (names []string, changed bool, err error) {
	if l.buf == nil {
		l.buf = make([]byte, 8192)
	}
	fd, err := openDir(dir)
	if err != nil {
		return nil, false, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	i := 0 // names matched so far
	var fresh []string
	for {
		n, err := syscall.ReadDirent(fd, l.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			break
		}
		for b := l.buf[:n]; len(b) > 0; {
			name, reclen, ok := direntName(b)
			if !ok {
				return nil, false, &fs.PathError{Op: "readdirent", Path: dir, Err: syscall.EINVAL}
			}
			b = b[reclen:]
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if fresh == nil && i < len(l.raw) && l.raw[i] == string(name) {
				i++
				continue
			}
			if fresh == nil {
				fresh = append(make([]string, 0, len(l.raw)+1), l.raw[:i]...)
			}
			fresh = append(fresh, string(name))
		}
	}
	if fresh == nil && i == len(l.raw) && l.raw != nil {
		return l.raw, false, nil
	}
	if fresh == nil { // a prefix of the last listing, or the first (empty) one
		fresh = append([]string{}, l.raw[:i]...)
	}
	l.raw = fresh
	return fresh, true, nil
}

func openDir(dir string) (int, error) {
	for {
		fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// direntName returns the name of the linux_dirent64 at the start of b
// (d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name NUL-terminated)
// and its length.
func direntName(b []byte) (name []byte, reclen int, ok bool) {
	const nameOff = 19
	if len(b) < nameOff {
		return nil, 0, false
	}
	reclen = int(binary.NativeEndian.Uint16(b[16:18]))
	if reclen < nameOff || reclen > len(b) {
		return nil, 0, false
	}
	name = b[nameOff:reclen]
	for i, c := range name {
		if c == 0 {
			return name[:i], reclen, true
		}
	}
	return name, reclen, true
}
