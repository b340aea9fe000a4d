package audit // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
)

// MaxLineBytes bounds one line of the audit file read back by Replay; a
// longer line is skipped. Real entries are a few KiB (a dry-run webhook
// entry carries the whole body).
const MaxLineBytes = 1 << 20

// ParseLine parses one line of the audit file (without its newline). An
// entry needs a decision and a step: anything else is not one of ours.
func ParseLine(line []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, err
	}
	if e.Decision == "" || e.Step == "" {
		return Entry{}, errors.New("not an audit entry: no decision or step")
	}
	return e, nil
}

// Replay calls fn with every entry of the audit file at path, in file
// order, and returns how many it passed. A missing file replays nothing.
// A line that does not parse (corrupt, too long, or the last line cut
// short by a crash) is logged as a warning with the file and line number
// and skipped. Only an error reading the file is returned.
func Replay(logger *zap.Logger, path string, fn func(Entry)) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()

	r := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	replayed := 0
	for lineNo := 1; ; lineNo++ {
		var tooLong, eof bool
		line, tooLong, eof, err = readLine(r, line[:0])
		if err != nil {
			return replayed, fmt.Errorf("audit: %s line %d: %w", path, lineNo, err)
		}
		switch {
		case tooLong:
			logger.Warn("audit file: line too long, skipped", zap.String("file", path), zap.Int("line", lineNo),
				zap.Int("max_bytes", MaxLineBytes))
		case len(bytes.TrimSpace(line)) == 0:
			// A blank line (or the end of a file that ends with a newline).
		default:
			e, perr := ParseLine(line)
			if perr != nil {
				why := "corrupt line, skipped"
				if eof {
					why = "last line cut short or corrupt, skipped"
				}
				logger.Warn("audit file: "+why, zap.String("file", path), zap.Int("line", lineNo), zap.Error(perr))
				break
			}
			fn(e)
			replayed++
		}
		if eof {
			return replayed, nil
		}
	}
}

// readLine appends the next line of r to buf, without its newline. eof
// says the file ended (the line, possibly empty, had no newline). A line
// over MaxLineBytes is read to its end and reported as tooLong.
func readLine(r *bufio.Reader, buf []byte) (line []byte, tooLong, eof bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > MaxLineBytes+1 { // +1: the newline
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte{'\n'}), tooLong, false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return buf, tooLong, true, nil
		default:
			return buf, tooLong, false, err
		}
	}
}
