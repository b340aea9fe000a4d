package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/test/childproc"
	"github.com/otelcol-gpu/otelcol-gpu/test/freeport"
)

// startProcess runs bin with args and env (added to this process's
// environment), logging to dir/name.log.
func startProcess(dir, name string, env []string, bin string, args ...string) (*childproc.Process, error) {
	p, err := childproc.Start(childproc.Options{Name: name, LogDir: dir, Env: env}, bin, args...)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	return p, nil
}

// stopGrace is how long a collector has to flush and exit on SIGTERM before
// its process group is killed.
const stopGrace = 20 * time.Second

// tail returns the last lines of p's log; nothing when it cannot be read.
func tail(p *childproc.Process, lines int) string {
	s, _ := p.Tail(lines)
	return s
}

// waitHealthy polls p's health_check extension at addr until it answers 200.
func waitHealthy(ctx context.Context, p *childproc.Process, addr string) error {
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("loadtest: %s exited at start (%v):\n%s", p.Name(), err, tail(p, 30))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loadtest: %s not healthy: %w", p.Name(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FreeAddr returns a loopback address nobody listens on now, outside the
// ports outgoing connections take (freeport).
func FreeAddr() (string, error) { return freeport.Addr() }

// RepoRoot finds the module root (the directory with go.mod) from the
// working directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("loadtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }
