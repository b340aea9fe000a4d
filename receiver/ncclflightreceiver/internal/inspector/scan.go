package inspector // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// DefaultPattern matches the plugin's file names, <hostname>-pid<pid>.log.
const DefaultPattern = "*-pid*.log"

// Scan returns the entries of dir (not below it) whose names match pattern
// (filepath.Match syntax; "" means DefaultPattern), sorted, except
// directories. Symlinks, FIFOs and other files that are not regular are
// returned too, so that the Tailer refuses and reports them (it never opens
// them for reading). A missing dir is no files, not an error: the plugin
// creates it on start.
func Scan(dir, pattern string) ([]string, error) {
	if pattern == "" {
		pattern = DefaultPattern
	}
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("ncclflightreceiver: inspector file pattern %q: %w", pattern, err)
	}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ncclflightreceiver: %s: listing inspector files: %w", dir, err)
	}
	var paths []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if ok, _ := filepath.Match(pattern, e.Name()); ok {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(paths)
	return paths, nil
}
