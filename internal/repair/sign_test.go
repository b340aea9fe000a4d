package repair

import (
	"crypto/ed25519"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)

// testKey derives a key from a seed byte, so tests need no randomness.
func testKey(seed byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	return ed25519.NewKeyFromSeed(s)
}

func signedRequest(t *testing.T, key ed25519.PrivateKey, method, path, node, id string, body []byte, at time.Time) *http.Request {
	t.Helper()
	s, err := NewSigner(key)
	require.NoError(t, err)
	req := httptest.NewRequest(method, "http://agent:8790"+path, strings.NewReader(string(body)))
	require.NoError(t, s.Sign(req, node, id, body, at))
	return req
}

func newTestVerifier(t *testing.T, capacity int, keys ...ed25519.PrivateKey) *Verifier {
	t.Helper()
	var pubs []ed25519.PublicKey
	for _, k := range keys {
		pubs = append(pubs, k.Public().(ed25519.PublicKey))
	}
	v, err := NewVerifier(pubs, 0, capacity)
	require.NoError(t, err)
	return v
}

func verifyReq(v *Verifier, r *http.Request, body []byte, now time.Time) (Signed, error) {
	return v.Verify(r.Method, r.URL.RequestURI(), r.Header, body, now)
}

func TestSignVerifyRoundTrip(t *testing.T) {
	key := testKey(1)
	v := newTestVerifier(t, 0, key)
	body := []byte(`{"id":"j1","node":"node-a","fault_id":"f","gpu_uuid":"GPU-1"}`)
	req := signedRequest(t, key, http.MethodPost, PathGPUReset, "node-a", "r1", body, t0)
	got, err := verifyReq(v, req, body, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, Signed{Node: "node-a", RequestID: "r1", Timestamp: t0}, got)

	// GET without a body.
	req = signedRequest(t, key, http.MethodGet, PathNode, "node-a", "r2", nil, t0)
	_, err = verifyReq(v, req, nil, t0)
	require.NoError(t, err)
}

// Changing any one signed field after signing breaks the signature.
func TestTamperingAnySignedFieldFails(t *testing.T) {
	key := testKey(1)
	body := []byte(`{"id":"j1","node":"node-a","fault_id":"f","gpu_uuid":"GPU-1"}`)
	for name, tamper := range map[string]func(method, uri *string, h http.Header, body *[]byte){
		"method": func(m, _ *string, _ http.Header, _ *[]byte) { *m = http.MethodPut },
		"path":   func(_, u *string, _ http.Header, _ *[]byte) { *u = PathVerify },
		"query":  func(_, u *string, _ http.Header, _ *[]byte) { *u += "?x=1" },
		"node":   func(_, _ *string, h http.Header, _ *[]byte) { h.Set(HeaderNode, "node-b") },
		"timestamp": func(_, _ *string, h http.Header, _ *[]byte) {
			h.Set(HeaderTimestamp, strconv.FormatInt(t0.Unix()+1, 10))
		},
		"requestid": func(_, _ *string, h http.Header, _ *[]byte) { h.Set(HeaderRequestID, "r2") },
		"body": func(_, _ *string, _ http.Header, b *[]byte) {
			*b = []byte(strings.Replace(string(*b), "GPU-1", "GPU-2", 1))
		},
		"empty body": func(_, _ *string, _ http.Header, b *[]byte) { *b = nil },
		"signature": func(_, _ *string, h http.Header, _ *[]byte) {
			s := []byte(h.Get(HeaderSignature))
			s[10] ^= 0x01
			h.Set(HeaderSignature, string(s))
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := newTestVerifier(t, 0, key)
			req := signedRequest(t, key, http.MethodPost, PathGPUReset, "node-a", "r1", body, t0)
			method, uri, b := req.Method, req.URL.RequestURI(), append([]byte(nil), body...)
			tamper(&method, &uri, req.Header, &b)
			_, err := v.Verify(method, uri, req.Header, b, t0)
			require.Error(t, err)
			if !errors.Is(err, ErrSignature) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrSignature or ErrMalformed", err)
			}
			assert.Zero(t, v.Len(), "a refused request is not remembered")
		})
	}
}

func TestWrongKeyFails(t *testing.T) {
	v := newTestVerifier(t, 0, testKey(1))
	req := signedRequest(t, testKey(2), http.MethodGet, PathNode, "node-a", "r1", nil, t0)
	_, err := verifyReq(v, req, nil, t0)
	assert.ErrorIs(t, err, ErrSignature)

	// A rotation: both keys are accepted.
	v = newTestVerifier(t, 0, testKey(1), testKey(2))
	_, err = verifyReq(v, req, nil, t0)
	assert.NoError(t, err)
}

func TestStaleFails(t *testing.T) {
	key := testKey(1)
	v := newTestVerifier(t, 0, key)
	for name, at := range map[string]time.Time{
		"old":    t0.Add(-DefaultMaxSkew - time.Second),
		"future": t0.Add(DefaultMaxSkew + time.Second),
	} {
		req := signedRequest(t, key, http.MethodGet, PathNode, "node-a", "r-"+name, nil, at)
		_, err := verifyReq(v, req, nil, t0)
		assert.ErrorIs(t, err, ErrStale, name)
	}
	// At the edge of the window: accepted.
	req := signedRequest(t, key, http.MethodGet, PathNode, "node-a", "r-edge", nil, t0.Add(-DefaultMaxSkew))
	_, err := verifyReq(v, req, nil, t0)
	assert.NoError(t, err)
}

func TestReplayFails(t *testing.T) {
	key := testKey(1)
	v := newTestVerifier(t, 0, key)
	req := signedRequest(t, key, http.MethodGet, PathNode, "node-a", "r1", nil, t0)
	_, err := verifyReq(v, req, nil, t0)
	require.NoError(t, err)
	_, err = verifyReq(v, req, nil, t0.Add(4*time.Minute))
	assert.ErrorIs(t, err, ErrReplay)
	// The same id signed again with a new timestamp is a replay too.
	req2 := signedRequest(t, key, http.MethodGet, PathNode, "node-a", "r1", nil, t0.Add(time.Minute))
	_, err = verifyReq(v, req2, nil, t0.Add(time.Minute))
	assert.ErrorIs(t, err, ErrReplay)
	// When the first request has left the window, the second (t0+1m) has
	// not: its id is still remembered and it is still refused.
	later := t0.Add(DefaultMaxSkew + time.Second)
	_, err = verifyReq(v, req, nil, later)
	assert.ErrorIs(t, err, ErrStale)
	_, err = verifyReq(v, req2, nil, later)
	assert.ErrorIs(t, err, ErrReplay, "a replay of the newer copy stays refused")
	req3 := signedRequest(t, key, http.MethodGet, PathNode, "node-a", "r2", nil, later)
	_, err = verifyReq(v, req3, nil, later)
	require.NoError(t, err)
	assert.Equal(t, 2, v.Len(), "r1 (t0+1m) is still in the window; r2 added")
	// Past the newer copy's window, r1 is forgotten.
	_, err = verifyReq(v, req3, nil, t0.Add(time.Minute+DefaultMaxSkew+time.Second))
	assert.ErrorIs(t, err, ErrReplay)
	assert.Equal(t, 1, v.Len())
}

// A full cache refuses (fail closed) until ids leave the window.
func TestReplayCacheFullRefuses(t *testing.T) {
	key := testKey(1)
	v := newTestVerifier(t, 2, key)
	for _, id := range []string{"a", "b"} {
		_, err := verifyReq(v, signedRequest(t, key, http.MethodGet, PathNode, "n", id, nil, t0), nil, t0)
		require.NoError(t, err)
	}
	_, err := verifyReq(v, signedRequest(t, key, http.MethodGet, PathNode, "n", "c", nil, t0), nil, t0)
	assert.ErrorIs(t, err, ErrReplayFull)
	// a and b are still refused as replays: nothing was forgotten.
	_, err = verifyReq(v, signedRequest(t, key, http.MethodGet, PathNode, "n", "a", nil, t0), nil, t0)
	assert.ErrorIs(t, err, ErrReplay)
	later := t0.Add(DefaultMaxSkew + time.Second)
	_, err = verifyReq(v, signedRequest(t, key, http.MethodGet, PathNode, "n", "c", nil, later), nil, later)
	assert.NoError(t, err)
}

func TestMalformedHeaders(t *testing.T) {
	key := testKey(1)
	v := newTestVerifier(t, 0, key)
	for name, mutate := range map[string]func(h http.Header){
		"no signature":     func(h http.Header) { h.Del(HeaderSignature) },
		"no timestamp":     func(h http.Header) { h.Del(HeaderTimestamp) },
		"no request id":    func(h http.Header) { h.Del(HeaderRequestID) },
		"no node":          func(h http.Header) { h.Del(HeaderNode) },
		"two nodes":        func(h http.Header) { h.Add(HeaderNode, "node-b") },
		"two signatures":   func(h http.Header) { h.Add(HeaderSignature, h.Get(HeaderSignature)) },
		"signed timestamp": func(h http.Header) { h.Set(HeaderTimestamp, "+1") },
		"long timestamp":   func(h http.Header) { h.Set(HeaderTimestamp, strings.Repeat("1", 19)) },
		"bad id":           func(h http.Header) { h.Set(HeaderRequestID, "a b") },
		"long id":          func(h http.Header) { h.Set(HeaderRequestID, strings.Repeat("a", MaxIDLen+1)) },
		"newline node":     func(h http.Header) { h.Set(HeaderNode, "a\nb") },
		"hmac":             func(h http.Header) { h.Set(HeaderSignature, "sha256="+strings.Repeat("0", 64)) },
		"short signature":  func(h http.Header) { h.Set(HeaderSignature, "ed25519=AAAA") },
		"not base64":       func(h http.Header) { h.Set(HeaderSignature, "ed25519="+strings.Repeat("!", 88)) },
	} {
		req := signedRequest(t, key, http.MethodGet, PathNode, "node-a", "r1", nil, t0)
		mutate(req.Header)
		_, err := verifyReq(v, req, nil, t0)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}

func TestSignRefusesBadInput(t *testing.T) {
	s, err := NewSigner(testKey(1))
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "http://agent"+PathNode, nil)
	assert.Error(t, s.Sign(req, "evil.com/#", "r1", nil, t0))
	assert.Error(t, s.Sign(req, "node-a", "", nil, t0))
	_, err = NewSigner(ed25519.PrivateKey{1, 2})
	assert.Error(t, err)
	_, err = NewVerifier(nil, 0, 0)
	assert.Error(t, err)
	_, err = NewVerifier([]ed25519.PublicKey{{1}}, 0, 0)
	assert.Error(t, err)
}

func TestValidNodeAndID(t *testing.T) {
	for _, n := range []string{"node-a", "gpu01.cluster.local", "n_1"} {
		assert.True(t, ValidNode(n), n)
	}
	for _, n := range []string{"", "a:1", "a/b", "a b", "a@b", strings.Repeat("a", MaxNodeLen+1), "{node}"} {
		assert.False(t, ValidNode(n), n)
	}
	assert.True(t, ValidID("fault-1:gpu_reset:0"))
	assert.False(t, ValidID("a/b"))
}
