package webhook

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/webhookverify"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const secret = "s3cret"

// receiver is a webhook endpoint that checks every request like a real
// receiver would (webhookverify.Verifier, replays refused) and fails the
// first failFirst attempts with 503, forgetting those so the retry passes.
type receiver struct {
	mu        sync.Mutex
	failFirst int
	attempts  int
	bodies    [][]byte
	delivery  []string
	verifyErr []error
	now       time.Time
	verifier  *webhookverify.Verifier
}

func newReceiver(failFirst int, now time.Time) *receiver {
	return &receiver{failFirst: failFirst, now: now, verifier: webhookverify.NewVerifier([]byte(secret), 0, 0)}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	d, err := r.verifier.Verify(req.Header, body, r.now)
	r.verifyErr = append(r.verifyErr, err)
	r.delivery = append(r.delivery, req.Header.Get(HeaderDelivery))
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.attempts <= r.failFirst {
		r.verifier.Forget(d.ID)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.bodies = append(r.bodies, body)
	w.WriteHeader(http.StatusNoContent)
}

type recordedSleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *recordedSleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

// newTestClient posts to srv, a TLS server: the endpoint is https:// as
// Validate requires without insecure.
func newTestClient(t *testing.T, srv *httptest.Server, retries int, sleeps *recordedSleeps, now time.Time, key string) *Client {
	cfg := Config{Endpoint: srv.URL, Secret: configopaque.String(key), Timeout: 5 * time.Second, Retries: retries}
	require.NoError(t, cfg.Validate())
	c := New(cfg, Options{InitialBackoff: time.Second, MaxBackoff: 3 * time.Second, Sleep: sleeps.sleep,
		Now: func() time.Time { return now }, Transport: srv.Client().Transport})
	t.Cleanup(c.Close)
	return c
}

func TestSendRetriesFailuresAndSigns(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := newReceiver(3, now)
	srv := httptest.NewTLSServer(rcv)
	defer srv.Close()
	sleeps := &recordedSleeps{}
	c := newTestClient(t, srv, 3, sleeps, now, secret)

	body := []byte(`{"route":"page"}`)
	attempts, err := c.Send(context.Background(), body, "a07573c9c14f1fae/open/notify")
	require.NoError(t, err)
	assert.Equal(t, 4, attempts)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for i, e := range rcv.verifyErr {
		assert.NoError(t, e, "attempt %d signature", i)
	}
	require.Len(t, rcv.bodies, 1)
	assert.Equal(t, body, rcv.bodies[0])
	assert.Equal(t, []string{"a07573c9c14f1fae/open/notify", "a07573c9c14f1fae/open/notify", "a07573c9c14f1fae/open/notify", "a07573c9c14f1fae/open/notify"}, rcv.delivery)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, sleeps.d, "exponential, capped")
}

func TestSendGivesUpAfterRetries(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := newReceiver(100, now)
	srv := httptest.NewTLSServer(rcv)
	defer srv.Close()
	c := newTestClient(t, srv, 2, &recordedSleeps{}, now, secret)
	attempts, err := c.Send(context.Background(), []byte(`{}`), "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "503")
	assert.Equal(t, 3, attempts)
}

func TestWrongSecretIsRejectedAndNotRetried(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := newReceiver(0, now)
	srv := httptest.NewTLSServer(rcv)
	defer srv.Close()
	c := newTestClient(t, srv, 3, &recordedSleeps{}, now, "wrong")
	attempts, err := c.Send(context.Background(), []byte(`{}`), "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401")
	assert.Equal(t, 1, attempts, "4xx is permanent")
}

// The client signs what webhookverify checks: timestamp, delivery id and
// body (the signed string's own tests are webhookverify's).
func TestSendSignsTimestampDeliveryAndBody(t *testing.T) {
	now := time.Unix(1741944435, 0)
	var got http.Header
	var body []byte
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got, body = req.Header.Clone(), mustRead(t, req)
	}))
	defer srv.Close()
	c := newTestClient(t, srv, 0, &recordedSleeps{}, now, secret)
	_, err := c.Send(context.Background(), []byte(`{"a":1}`), "a07573c9c14f1fae/open/notify")
	require.NoError(t, err)
	assert.Equal(t, "1741944435", got.Get(HeaderTimestamp))
	assert.Equal(t, webhookverify.Sign([]byte(secret), "1741944435", "a07573c9c14f1fae/open/notify", []byte(`{"a":1}`)), got.Get(HeaderSignature))
	d, err := webhookverify.Verify([]byte(secret), got, body, now)
	require.NoError(t, err)
	assert.Equal(t, "a07573c9c14f1fae/open/notify", d.ID)
}

func mustRead(t *testing.T, req *http.Request) []byte {
	b, err := io.ReadAll(req.Body)
	assert.NoError(t, err)
	return b
}

// A delivery id that could be re-cut into another id and body with the
// same signature is not sent.
func TestSendRefusesAnUnsignableDeliveryID(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("nothing is posted") }))
	defer srv.Close()
	c := newTestClient(t, srv, 3, &recordedSleeps{}, time.Unix(1741944435, 0), secret)
	for _, id := range []string{"", "a.b/open/notify", "a b", strings.Repeat("x", webhookverify.MaxDeliveryIDLen+1)} {
		attempts, err := c.Send(context.Background(), []byte(`{}`), id)
		require.Error(t, err, "%q", id)
		assert.Contains(t, err.Error(), "not retried")
		assert.Zero(t, attempts)
	}
}

// A redirect is not followed: it could send the signed body elsewhere, or
// over http.
func TestSendDoesNotFollowRedirects(t *testing.T) {
	var elsewhere int
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere++ }))
	defer other.Close()
	srv := httptest.NewTLSServer(http.RedirectHandler(other.URL, http.StatusPermanentRedirect))
	defer srv.Close()
	c := newTestClient(t, srv, 3, &recordedSleeps{}, time.Unix(1741944435, 0), secret)
	attempts, err := c.Send(context.Background(), []byte(`{}`), "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "308")
	assert.Equal(t, 1, attempts, "3xx is permanent")
	assert.Zero(t, elsewhere)
}

// insecure: true is the way to post over http (a sidecar on localhost).
func TestSendOverHTTPWithInsecure(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := newReceiver(0, now)
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := Config{Endpoint: srv.URL, Secret: secret, Timeout: time.Second, Insecure: true}
	require.NoError(t, cfg.Validate())
	c := New(cfg, Options{Now: func() time.Time { return now }})
	defer c.Close()
	_, err := c.Send(context.Background(), []byte(`{}`), "x")
	require.NoError(t, err)
}

func TestSendHonoursContext(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := newReceiver(100, now)
	srv := httptest.NewTLSServer(rcv)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c := New(Config{Endpoint: srv.URL, Secret: secret, Timeout: time.Second, Retries: 5},
		Options{Now: func() time.Time { return now }, Transport: srv.Client().Transport,
			Sleep: func(context.Context, time.Duration) error { cancel(); return context.Canceled }})
	defer c.Close()
	attempts, err := c.Send(ctx, []byte(`{}`), "x")
	require.Error(t, err)
	assert.Equal(t, 1, attempts)
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, Config{Timeout: time.Second}.Validate(), "no endpoint: disabled")
	assert.NoError(t, Config{Endpoint: "https://pager.example/faults", Secret: "x", Timeout: time.Second, Retries: 3}.Validate())
	err := Config{Endpoint: "ftp://x", Timeout: 0, Retries: -1}.Validate()
	require.Error(t, err)
	for _, want := range []string{"secret is required", "not an http(s) URL", "timeout", "retries"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Error(t, Config{Endpoint: "http://", Secret: "x", Timeout: time.Second}.Validate())
}

func TestConfigValidateWantsHTTPSUnlessInsecure(t *testing.T) {
	err := Config{Endpoint: "http://pager.example/faults", Secret: "x", Timeout: time.Second}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "webhook.endpoint")
	assert.Contains(t, err.Error(), "webhook.insecure")
	assert.NoError(t, Config{Endpoint: "http://127.0.0.1:8080/faults", Secret: "x", Timeout: time.Second, Insecure: true}.Validate())
	assert.NoError(t, Config{Endpoint: "HTTPS://pager.example/faults", Secret: "x", Timeout: time.Second}.Validate(), "the scheme is case-insensitive")
}

func TestPayloadJSONKeepsNaNEvidence(t *testing.T) {
	r := fault.Record{ID: "a07573c9c14f1fae", Type: fault.TypeTrainingLossNaN, State: fault.StateOpen, Severity: fault.SeverityP1,
		Entity: fault.Entity{Kind: fault.EntityNode, Key: "xl003"}, RankKnown: true, Rank: 0,
		Evidence: []fault.Evidence{{Signal: "training.loss", Value: math.NaN()}, {Signal: "x", Value: 2.5}}}
	b, err := json.Marshal(Payload{Route: "page", Fault: FaultFromRecord(r)})
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(b, &back))
	f := back["fault"].(map[string]any)
	assert.Equal(t, "a07573c9c14f1fae", f["fault.id"])
	assert.Equal(t, 0.0, f["training.rank"], "a known rank 0 is kept")
	ev := f["fault.evidence"].([]any)
	assert.Equal(t, "NaN", ev[0].(map[string]any)["value"])
	assert.Equal(t, 2.5, ev[1].(map[string]any)["value"])
	assert.Equal(t, "node:xl003", f["fault.entity"])
}

// The payload's fault object is named after the record's attributes
// (payload.go): every attribute the correlator writes on a full record is
// a key of it, so a receiver reads the same names as a log search.
func TestPayloadFaultKeysAreTheRecordAttributes(t *testing.T) {
	at := time.Date(2025, 3, 14, 9, 26, 40, 0, time.UTC)
	r := fault.Record{ID: "a07573c9c14f1fae", Type: fault.TypeGPUMemoryDBE, State: fault.StateOpen, Severity: fault.SeverityP1,
		Confidence: 0.9, Rule: "xid_dbe", Action: fault.ActionCordon, BlastRadius: fault.BlastGPU,
		Entity: fault.Entity{Kind: fault.EntityGPU, Key: "GPU-5"}, XID: 48, HostName: "xl003", GPUUUID: "GPU-5",
		JobID: "llama-70b", RankKnown: true, Rank: 3, FirstSeen: at, LastSeen: at, PresentAtStart: true,
		Evidence: []fault.Evidence{{Signal: "gpu.xid", Value: 48, Time: at}}}
	lr := plog.NewLogRecord()
	r.ToLogRecord(lr)
	b, err := json.Marshal(FaultFromRecord(r))
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(b, &keys))
	require.Positive(t, lr.Attributes().Len())
	lr.Attributes().Range(func(k string, _ pcommon.Value) bool {
		assert.Contains(t, keys, k, "attribute %s of the fault record", k)
		return true
	})
}
