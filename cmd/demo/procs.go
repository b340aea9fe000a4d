package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/otelcol-gpu/otelcol-gpu/test/childproc"
	"github.com/otelcol-gpu/otelcol-gpu/test/freeport"
)

// process is one of the demo's children, its output in its own log file.
type process struct {
	*childproc.Process
	// stage orders the stop: higher stages stop first (agents, then the
	// gateway, then the broker they both still need while they flush).
	stage int
	// finishing: the demo ended the child's input, so its exit is expected
	// and not a failure of the run (exited skips it).
	finishing atomic.Bool
}

// procs are the demo's children; stopAll ends every one of them.
type procs struct {
	mu   sync.Mutex
	list []*process
}

func (ps *procs) start(stage int, name, logDir string, env []string, bin string, args ...string) (*process, error) {
	p, _, err := ps.startPiped(stage, name, logDir, env, nil, bin, args...)
	return p, err
}

// startPiped starts a child whose stderr (and stdout, when stdout is nil)
// goes to its log. With stdout set it also returns the child's stdin.
// Read stdout only once the child is done.
func (ps *procs) startPiped(stage int, name, logDir string, env []string, stdout io.Writer, bin string, args ...string) (*process, io.WriteCloser, error) {
	// Own process group: a Ctrl-C in the terminal reaches the demo only,
	// which then stops the children in order (and kills what is left); the
	// kernel kills them if the demo dies without stopping them.
	child, err := childproc.Start(childproc.Options{
		Name: name, LogDir: logDir, Env: env,
		Stdout: stdout, Stdin: stdout != nil,
		DieWithParent: true,
	}, bin, args...)
	if err != nil {
		return nil, nil, err
	}
	p := &process{Process: child, stage: stage}
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, child.Stdin(), nil
}

// exited returns the first child that exited unexpectedly, or nil.
func (ps *procs) exited() *process {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.list {
		if p.finishing.Load() {
			continue
		}
		if exited, _ := p.Exited(); exited {
			return p
		}
	}
	return nil
}

// stopAll stops the children stage by stage, highest first: SIGTERM to
// every child of the stage, then SIGKILL to the process group of any still
// running after grace. Safe to call again.
func (ps *procs) stopAll(grace time.Duration) {
	ps.mu.Lock()
	list := append([]*process(nil), ps.list...)
	ps.mu.Unlock()
	top := -1
	for _, p := range list {
		top = max(top, p.stage)
	}
	for stage := top; stage >= 0; stage-- {
		var group []*childproc.Process
		for _, p := range list {
			if p.stage == stage {
				group = append(group, p.Process)
			}
		}
		childproc.StopAll(grace, group...)
	}
}

// tail returns the last n lines of the process's log, or why it cannot.
func (p *process) tail(n int) string {
	s, err := p.Tail(n)
	if err != nil {
		return err.Error()
	}
	return s
}

// freeAddr returns a loopback address nobody listens on now, outside the
// ports outgoing connections take (freeport).
func freeAddr() (string, error) { return freeport.Addr() }

// waitFor polls check until it succeeds, ctx ends or a child exits.
func waitFor(ctx context.Context, ps *procs, what string, wait time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		if p := ps.exited(); p != nil {
			return fmt.Errorf("%s: %s exited (%v); last lines of %s:\n%s", what, p.Name(), p.Err(), p.LogPath(), p.tail(20))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func dialCheck(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
}

func httpCheck(url string) func() error {
	client := &http.Client{Timeout: time.Second}
	return func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
		}
		return nil
	}
}

// backendSink stands in for Prometheus (remote write), Loki (OTLP/HTTP)
// and Tempo (OTLP/gRPC): it accepts everything and keeps nothing, so the
// gateway's backend pipelines flow without those servers. Fault detection
// does not depend on it (docs/architecture.md).
type backendSink struct {
	httpSrv *http.Server
	grpcSrv *grpc.Server
	HTTP    string // base URL
	GRPC    string // host:port
}

func startBackendSink() (*backendSink, error) {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		hl.Close()
		return nil, err
	}
	s := &backendSink{
		HTTP: "http://" + hl.Addr().String(),
		GRPC: gl.Addr().String(),
		httpSrv: &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			// An empty OTLP response; Prometheus remote write accepts any 2xx.
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		})},
		grpcSrv: grpc.NewServer(),
	}
	ptraceotlp.RegisterGRPCServer(s.grpcSrv, &acceptTraces{})
	pmetricotlp.RegisterGRPCServer(s.grpcSrv, &acceptMetrics{})
	plogotlp.RegisterGRPCServer(s.grpcSrv, &acceptLogs{})
	go func() { _ = s.httpSrv.Serve(hl) }()
	go func() { _ = s.grpcSrv.Serve(gl) }()
	return s, nil
}

func (s *backendSink) close() {
	_ = s.httpSrv.Close()
	s.grpcSrv.Stop()
}

type acceptTraces struct {
	ptraceotlp.UnimplementedGRPCServer
}

func (*acceptTraces) Export(context.Context, ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	return ptraceotlp.NewExportResponse(), nil
}

type acceptMetrics struct {
	pmetricotlp.UnimplementedGRPCServer
}

func (*acceptMetrics) Export(context.Context, pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	return pmetricotlp.NewExportResponse(), nil
}

type acceptLogs struct {
	plogotlp.UnimplementedGRPCServer
}

func (*acceptLogs) Export(context.Context, plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	return plogotlp.NewExportResponse(), nil
}
