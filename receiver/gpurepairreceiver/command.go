package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// commandReset resets a GPU by running the configured command.
type commandReset struct {
	argv    []string
	timeout time.Duration
}

// reset runs the command for gpu: without a shell, in a process group of
// its own that is killed when ctx ends or the timeout passes, with its
// output (stdout and stderr together) kept up to maxOutputBytes.
func (c *commandReset) reset(ctx context.Context, gpu verify.GPU) (ResetOutcome, error) {
	argv := make([]string, len(c.argv))
	for i, a := range c.argv {
		a = strings.ReplaceAll(a, PlaceholderIndex, strconv.Itoa(gpu.Index))
		argv[i] = strings.ReplaceAll(a, PlaceholderUUID, gpu.UUID)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	out := &boundedBuffer{max: maxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	killGroupOnCancel(cmd) // the whole group: the command may start helpers
	// After the kill, stop waiting for output a stray descendant still
	// holds open.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := ResetOutcome{ExitCode: -1, Output: out.String()}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case err == nil:
		return res, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return res, fmt.Errorf("%s did not end within %s: killed", argv[0], c.timeout)
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s stopped: %w", argv[0], ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return res, fmt.Errorf("%s exited with status %d", argv[0], res.ExitCode)
	}
	return res, fmt.Errorf("running %s: %w", argv[0], err)
}

// boundedBuffer keeps the first max bytes written and counts the rest.
type boundedBuffer struct {
	mu      sync.Mutex
	max     int
	b       []byte
	dropped int
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.max - len(w.b)
	if room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	if len(p) > room {
		w.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.ToValidUTF8(string(w.b), "?")
	if w.dropped > 0 {
		s += fmt.Sprintf("... (%d more bytes)", w.dropped)
	}
	return s
}
