//go:build envtest || slurm

package remediationexporter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/webhookverify"
)

// Helpers shared by the tests against real servers (envtest, slurm) and
// the in-process collector test.

// signedHook is a webhook receiver as a pager bridge would run it: it
// verifies every request with webhookverify.Verify and fails the first attempt of
// each delivery, so every delivery the exporter makes needs its retry.
type signedHook struct {
	mu        sync.Mutex
	attempts  map[string]int // delivery id -> attempts seen
	delivered []delivery
	badSigs   int
}

type delivery struct {
	id       string
	attempts int
	payload  webhook.Payload
}

func newSignedHook(t *testing.T) (*signedHook, string) {
	h := &signedHook{attempts: map[string]int{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *signedHook) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err == nil {
		_, err = webhookverify.Verify([]byte(testSecret), req.Header, body, time.Now())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := req.Header.Get(webhook.HeaderDelivery)
	h.attempts[id]++
	if h.attempts[id] == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var p webhook.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.delivered = append(h.delivered, delivery{id: id, attempts: h.attempts[id], payload: p})
}

func (h *signedHook) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.delivered...)
}

func (h *signedHook) badSignatures() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.badSigs
}

// deliveriesWith returns the deliveries asking request (notify,
// breaker_tripped, ...).
func (h *signedHook) deliveriesWith(request string) []delivery {
	var out []delivery
	for _, d := range h.deliveries() {
		if d.payload.Decision.Request == request {
			out = append(out, d)
		}
	}
	return out
}

// actingConfig is the exporter's default config, acting (dry_run false),
// posting to hookURL, with an audit file and short backoffs.
func actingConfig(t *testing.T, hookURL string) *Config {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.DryRun = false
	cfg.Webhook.Endpoint = hookURL
	cfg.Webhook.Secret = testSecret
	cfg.Webhook.Insecure = true // httptest serves http://
	cfg.Backoff = BackoffConfig{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	cfg.AuditFile = filepath.Join(t.TempDir(), "audit.jsonl")
	return cfg
}

// startFromFactory creates the exporter through NewFactory().CreateLogs, as
// the collector does, starts it and shuts it down at the end of the test.
func startFromFactory(t *testing.T, cfg *Config) *remediationExporter {
	t.Helper()
	return startFromFactoryOn(t, cfg, componenttest.NewNopHost())
}

// startFromFactoryOn is startFromFactory on host (console_*_test.go: a host
// with a fault console).
func startFromFactoryOn(t *testing.T, cfg *Config, host component.Host) *remediationExporter {
	t.Helper()
	require.NoError(t, cfg.Validate())
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	exp, err := NewFactory().CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	re, ok := exp.(*remediationExporter)
	require.True(t, ok, "the factory builds a *remediationExporter")
	return re
}

// stepDecision matches one step with one decision, for one node ("" any).
func stepDecision(step, decision, node string) func(audit.Entry) bool {
	return func(e audit.Entry) bool {
		return e.Step == step && e.Decision == decision && (node == "" || e.Node == node)
	}
}
