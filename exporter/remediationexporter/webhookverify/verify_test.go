package webhookverify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	secret = []byte("s3cret")
	at     = time.Unix(1741944435, 0)
	body   = []byte(`{"route":"page","fault":{"fault.id":"a07573c9c14f1fae"}}`)
)

const deliveryID = "a07573c9c14f1fae/open/notify"

// signed returns the headers the exporter sends for body under id at ts.
func signed(ts time.Time, id string, b []byte) http.Header {
	s := strconv.FormatInt(ts.Unix(), 10)
	h := http.Header{}
	h.Set(HeaderTimestamp, s)
	h.Set(HeaderDelivery, id)
	h.Set(HeaderSignature, Sign(secret, s, id, b))
	return h
}

func TestSignIsTheDocumentedString(t *testing.T) {
	// HMAC-SHA256("s3cret", "1741944435.a07573c9c14f1fae/open/notify.{}"),
	// computed independently: python3 -c 'import hmac,hashlib;
	// print(hmac.new(b"s3cret", b"1741944435.a07573c9c14f1fae/open/notify.{}", hashlib.sha256).hexdigest())'
	assert.Equal(t, "sha256=3e4626004074bf8d64664cb461af29da527257e2f9e948dabd5b0edc5d60a107",
		Sign(secret, "1741944435", deliveryID, []byte(`{}`)))
}

func TestVerifyAcceptsAValidDelivery(t *testing.T) {
	d, err := Verify(secret, signed(at, deliveryID, body), body, at.Add(DefaultMaxSkew))
	require.NoError(t, err)
	assert.Equal(t, Delivery{ID: deliveryID, Timestamp: at}, d)
	_, err = Verify(secret, signed(at, deliveryID, body), body, at.Add(-DefaultMaxSkew))
	assert.NoError(t, err, "a sender clock ahead by the skew")
}

func TestVerifyRejects(t *testing.T) {
	h := signed(at, deliveryID, body)
	newID := h.Clone()
	newID.Set(HeaderDelivery, "a07573c9c14f1fae/open/restart_app")
	newTS := h.Clone()
	newTS.Set(HeaderTimestamp, strconv.FormatInt(at.Unix()+1, 10))
	wrongKey := h.Clone()
	wrongKey.Set(HeaderSignature, Sign([]byte("other"), strconv.FormatInt(at.Unix(), 10), deliveryID, body))
	for _, c := range []struct {
		name   string
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"same body, new delivery id, old signature", newID, body, at, ErrSignature},
		{"new timestamp, old signature", newTS, body, at, ErrSignature},
		{"tampered body", h, []byte(`{"route":"chat"}`), at, ErrSignature},
		{"wrong secret", wrongKey, body, at, ErrSignature},
		{"old timestamp", h, body, at.Add(DefaultMaxSkew + time.Second), ErrStale},
		{"timestamp from the future", h, body, at.Add(-DefaultMaxSkew - time.Second), ErrStale},
	} {
		_, err := Verify(secret, c.header, c.body, c.now)
		assert.ErrorIs(t, err, c.want, c.name)
	}
}

// Re-cutting the signed string (moving the '.' between id and body) does
// not verify: an id with '.' is malformed.
func TestVerifyRefusesARecutDelivery(t *testing.T) {
	h := signed(at, deliveryID, body)
	cut := strings.Index(string(body), ".") // {"route":"page","fault":{"fault|.|id"...
	require.Positive(t, cut)
	recut := h.Clone()
	recut.Set(HeaderDelivery, deliveryID+"."+string(body[:cut]))
	_, err := Verify(secret, recut, body[cut+1:], at)
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestVerifyRejectsMalformedHeaders(t *testing.T) {
	for name, edit := range map[string]func(http.Header){
		"no timestamp":       func(h http.Header) { h.Del(HeaderTimestamp) },
		"no delivery":        func(h http.Header) { h.Del(HeaderDelivery) },
		"no signature":       func(h http.Header) { h.Del(HeaderSignature) },
		"two timestamps":     func(h http.Header) { h.Add(HeaderTimestamp, "1741944435") },
		"two deliveries":     func(h http.Header) { h.Add(HeaderDelivery, "other") },
		"signed timestamp":   func(h http.Header) { h.Set(HeaderTimestamp, "+1741944435") },
		"fractional seconds": func(h http.Header) { h.Set(HeaderTimestamp, "1741944435.5") },
		"other algorithm":    func(h http.Header) { h.Set(HeaderSignature, "sha1="+strings.Repeat("0", 64)) },
		"short signature":    func(h http.Header) { h.Set(HeaderSignature, "sha256=00") },
		"not hex":            func(h http.Header) { h.Set(HeaderSignature, "sha256="+strings.Repeat("z", 64)) },
		"space in id":        func(h http.Header) { h.Set(HeaderDelivery, "a b") },
	} {
		h := signed(at, deliveryID, body)
		edit(h)
		_, err := Verify(secret, h, body, at)
		assert.ErrorIs(t, err, ErrMalformed, name)
		var me malformedError
		if assert.True(t, errors.As(err, &me), name) {
			assert.Contains(t, err.Error(), "X-Otelcol-Gpu-", "%s: the error names the header", name)
		}
	}
}

func TestValidDeliveryID(t *testing.T) {
	for _, id := range []string{deliveryID, "a07573c9c14f1fae/breaker_tripped", "x", strings.Repeat("x", MaxDeliveryIDLen)} {
		assert.True(t, ValidDeliveryID(id), id)
	}
	for _, id := range []string{"", "a.b", "a b", "a\tb", "é", "a\x7f", strings.Repeat("x", MaxDeliveryIDLen+1)} {
		assert.False(t, ValidDeliveryID(id), "%q", id)
	}
}
