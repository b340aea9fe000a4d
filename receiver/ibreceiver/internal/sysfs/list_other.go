//go:build !linux

package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import "os"

// lister lists one directory again and again (see list_linux.go).
type lister struct {
	raw []string
}

// list returns the names of dir and whether they differ from the last
// listing.
func (l *lister) list(dir string) (names []string, changed bool, err error) {
	names, err = readDirNames(dir)
	if err != nil {
		return nil, false, err
	}
	if l.raw != nil && equalNames(names, l.raw) {
		return l.raw, false, nil
	}
	l.raw = names
	return names, true, nil
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
