//go:build !unix

package safefile // import "github.com/otelcol-gpu/otelcol-gpu/internal/safefile"

import "os"

// openNoFollow refuses a symlink by Lstat where the platform has no
// O_NOFOLLOW; the regular-file check still happens on the open file.
func openNoFollow(path string) (*os.File, error) {
	if info, err := os.Lstat(path); err == nil {
		if err := Check(path, info.Mode()); err != nil && Reason(err) == ReasonSymlink {
			return nil, err
		}
	}
	return os.Open(path)
}

func isLoop(error) bool { return false }
