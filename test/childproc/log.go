package childproc

import (
	"bytes"
	"os"
	"strings"
)

// Tail returns the last n lines of the child's log.
func (p *Process) Tail(n int) (string, error) {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n"), nil
}

// LogCount counts the occurrences of s in the child's log (0 when the log
// cannot be read).
func (p *Process) LogCount(s string) int {
	data, _ := os.ReadFile(p.log)
	return bytes.Count(data, []byte(s))
}
