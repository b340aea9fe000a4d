package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
)

// faultConsole is the extension: the store (the console.Console other
// components find through host.GetExtensions) and the HTTP server.
type faultConsole struct {
	*store
	cfg       *Config
	set       extension.Settings
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	api       *api

	mu       sync.Mutex
	server   *http.Server
	listener net.Listener
	done     chan struct{}
	// shutdownWait is the constant (tests shorten it).
	shutdownWait time.Duration
}

var (
	_ console.Console     = (*faultConsole)(nil)
	_ extension.Extension = (*faultConsole)(nil)
)

func newExtension(cfg *Config, set extension.Settings) (*faultConsole, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("faultconsoleextension: creating telemetry: %w", err)
	}
	e := &faultConsole{cfg: cfg, set: set, logger: set.Logger, telemetry: tb, shutdownWait: shutdownWait}
	e.store = newStore(storeLimits{
		MaxFaults:         cfg.MaxFaults,
		ResolvedRetention: cfg.ResolvedRetention,
		MaxJobs:           cfg.MaxJobs,
		HeatmapSteps:      cfg.HeatmapSteps,
		MaxRanks:          cfg.MaxRanks,
		MaxHeatmapCells:   cfg.MaxHeatmapCells,
	}, time.Now, e.evicted)
	e.api = newAPI(e.store, apiOptions{
		TraceURL:  cfg.TraceURL,
		LogsURL:   cfg.LogsURL,
		BuildInfo: set.BuildInfo,
		Logger:    set.Logger,
		Telemetry: tb,
	})
	return e, nil
}

// evicted counts what the store forgot; it runs under the store's lock.
func (e *faultConsole) evicted(kind, reason string) {
	e.telemetry.FaultconsoleEvictions.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrKind, kind),
		attribute.String(metadata.TelemetryAttrReason, reason),
	)))
}

// readToken reads the bearer token from path.
func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token_file %q: %w", path, err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("token_file %q is empty: write a random token of at least %d bytes into it (e.g. openssl rand -hex 32)", path, minTokenLen)
	}
	if len(token) < minTokenLen {
		return "", fmt.Errorf("token_file %q holds a token of %d bytes, shorter than the %d required", path, len(token), minTokenLen)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("token_file %q: the token must be one line without white space", path)
	}
	return token, nil
}

// Start reads the token, listens on the endpoint and serves.
func (e *faultConsole) Start(ctx context.Context, _ component.Host) error {
	token, err := readToken(e.cfg.TokenFile)
	if err != nil {
		return fmt.Errorf("faultconsole: %w", err)
	}
	if fi, err := os.Stat(e.cfg.TokenFile); err == nil && fi.Mode().Perm()&0o004 != 0 {
		e.logger.Warn("faultconsole: token_file is readable by every user of this machine; make it 0600 or 0640",
			zap.String("token_file", e.cfg.TokenFile), zap.String("mode", fi.Mode().Perm().String()))
	}
	e.api.setToken(token)
	var tlsCfg *tls.Config
	if e.cfg.TLS != nil {
		if tlsCfg, err = e.cfg.TLS.LoadTLSConfig(ctx); err != nil {
			return fmt.Errorf("faultconsole: tls: %w", err)
		}
	}
	if e.cfg.Forward.Enabled {
		if e.api.fwd, err = newForwarder(ctx, e.cfg.Forward); err != nil {
			return fmt.Errorf("faultconsole: %w", err)
		}
	}
	ln, err := net.Listen("tcp", e.cfg.Endpoint)
	if err != nil {
		return fmt.Errorf("faultconsole: listening on endpoint %q (is another process using the port?): %w", e.cfg.Endpoint, err)
	}
	scheme := "http"
	if tlsCfg != nil {
		ln, scheme = tls.NewListener(ln, tlsCfg), "https"
	} else if host, _, _ := net.SplitHostPort(e.cfg.Endpoint); !loopback(host) {
		e.logger.Warn("faultconsole: serving plain HTTP off loopback: the bearer token crosses the network in clear; set tls",
			zap.String("endpoint", e.cfg.Endpoint))
	}
	srv := &http.Server{
		Handler:           e.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(e.logger),
	}
	done := make(chan struct{})
	e.mu.Lock()
	e.server, e.listener, e.done = srv, ln, done
	e.mu.Unlock()
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.logger.Error("faultconsole: server stopped", zap.Error(err))
		}
	}()
	e.logger.Info("faultconsole: serving", zap.String("endpoint", ln.Addr().String()), zap.String("scheme", scheme),
		zap.Bool("forward_controls_to_owner", e.api.fwd != nil))
	return nil
}

// loopback: host is localhost or a loopback address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr is the address the console listens on ("" before Start).
func (e *faultConsole) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listener == nil {
		return ""
	}
	return e.listener.Addr().String()
}

// Handler is the console's HTTP handler (page and API); tests serve it.
func (e *faultConsole) Handler() http.Handler { return e.api }

// shutdownWait bounds how long Shutdown lets requests in progress finish
// before it closes their connections: the collector's context never ends
// (issue 29).
const shutdownWait = 5 * time.Second

// Shutdown stops the server within ctx, and within shutdownWait, and
// forgets the controller.
func (e *faultConsole) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	srv, done := e.server, e.done
	e.server, e.listener = nil, nil
	e.mu.Unlock()
	var err error
	if srv != nil {
		sctx, cancel := context.WithTimeout(ctx, e.shutdownWait)
		err = srv.Shutdown(sctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				// Only the bound passed: not a failed shutdown.
				e.logger.Warn("faultconsole: requests still in progress at shutdown; closing their connections", zap.Duration("waited", e.shutdownWait))
				err = nil
			}
			err = errors.Join(err, srv.Close())
		}
		<-done
	}
	if e.api.fwd != nil {
		e.api.fwd.close()
	}
	e.store.Attach(nil)
	e.telemetry.Shutdown()
	return err
}
