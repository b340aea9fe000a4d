//go:build unix

package safefile // import "github.com/otelcol-gpu/otelcol-gpu/internal/safefile"

import (
	"errors"
	"os"
	"syscall"
)

func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
}

// isLoop: O_NOFOLLOW on a symlink fails with ELOOP (EMLINK on some BSDs).
func isLoop(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}
