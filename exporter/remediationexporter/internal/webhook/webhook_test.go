package webhook

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const secret = "s3cret"

// receiver is a webhook endpoint that checks every request like a real
// receiver would and fails the first failFirst attempts with 503.
type receiver struct {
	mu        sync.Mutex
	failFirst int
	attempts  int
	bodies    [][]byte
	delivery  []string
	verifyErr []error
	now       time.Time
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	err := Verify([]byte(secret), req.Header.Get(HeaderTimestamp), body, req.Header.Get(HeaderSignature), r.now, MaxSkew)
	r.verifyErr = append(r.verifyErr, err)
	r.delivery = append(r.delivery, req.Header.Get(HeaderDelivery))
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.attempts <= r.failFirst {
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

func newTestClient(t *testing.T, endpoint string, retries int, sleeps *recordedSleeps, now time.Time, key string) *Client {
	c := New(Config{Endpoint: endpoint, Secret: configopaque.String(key), Timeout: 5 * time.Second, Retries: retries},
		Options{InitialBackoff: time.Second, MaxBackoff: 3 * time.Second, Sleep: sleeps.sleep, Now: func() time.Time { return now }})
	t.Cleanup(c.Close)
	return c
}

func TestSendRetriesFailuresAndSigns(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := &receiver{failFirst: 3, now: now}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	sleeps := &recordedSleeps{}
	c := newTestClient(t, srv.URL, 3, sleeps, now, secret)

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
	rcv := &receiver{failFirst: 100, now: now}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	c := newTestClient(t, srv.URL, 2, &recordedSleeps{}, now, secret)
	attempts, err := c.Send(context.Background(), []byte(`{}`), "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "503")
	assert.Equal(t, 3, attempts)
}

func TestWrongSecretIsRejectedAndNotRetried(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := &receiver{now: now}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	c := newTestClient(t, srv.URL, 3, &recordedSleeps{}, now, "wrong")
	attempts, err := c.Send(context.Background(), []byte(`{}`), "x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401")
	assert.Equal(t, 1, attempts, "4xx is permanent")
}

func TestVerifyRejectsReplayAndTampering(t *testing.T) {
	body := []byte(`{"a":1}`)
	ts := "1741944435"
	sig := Sign([]byte(secret), ts, body)
	at := time.Unix(1741944435, 0)
	require.NoError(t, Verify([]byte(secret), ts, body, sig, at, MaxSkew))
	assert.Error(t, Verify([]byte(secret), ts, body, sig, at.Add(MaxSkew+time.Second), MaxSkew), "replayed later")
	assert.Error(t, Verify([]byte(secret), "1741944436", body, sig, at, MaxSkew), "timestamp is signed")
	assert.Error(t, Verify([]byte(secret), ts, []byte(`{"a":2}`), sig, at, MaxSkew), "body is signed")
	assert.Error(t, Verify([]byte(secret), "soon", body, Sign([]byte(secret), "soon", body), at, MaxSkew))
}

func TestSendHonoursContext(t *testing.T) {
	now := time.Unix(1741944435, 0)
	rcv := &receiver{failFirst: 100, now: now}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c := New(Config{Endpoint: srv.URL, Secret: secret, Timeout: time.Second, Retries: 5},
		Options{Now: func() time.Time { return now }, Sleep: func(context.Context, time.Duration) error { cancel(); return context.Canceled }})
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
		JobID: "llama-70b", RankKnown: true, Rank: 3, FirstSeen: at, LastSeen: at,
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
