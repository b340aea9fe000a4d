package kmsg

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Boot time turns /dev/kmsg's microseconds since boot into wall time. It
// comes from the btime line of /proc/stat: the kernel's own figure, one
// second resolution, already corrected when the wall clock was stepped since
// boot. (kmsg time stops during suspend and btime does not, which only
// matters on machines that sleep; GPU servers do not.)

// readBootTime reads btime from the /proc/stat at path.
func readBootTime(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	t, err := parseBootTime(f)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// parseBootTime finds the "btime <unix seconds>" line of /proc/stat. The
// whole file is read rather than scanned by lines: the intr line before
// btime can be longer than a scanner's buffer on a large machine.
func parseBootTime(r io.Reader) (time.Time, error) {
	data, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(data)) {
		v, ok := strings.CutPrefix(line, "btime ")
		if !ok {
			continue
		}
		secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || secs <= 0 {
			return time.Time{}, fmt.Errorf("btime %q is not a positive number of seconds", truncate(strings.TrimSpace(v)))
		}
		return time.Unix(secs, 0), nil
	}
	return time.Time{}, errors.New("no btime line")
}
