package webhookverify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors Verify returns, wrapped with detail; test with errors.Is.
var (
	// ErrMalformed: a header is missing, repeated, or not in its format.
	ErrMalformed = errors.New("webhookverify: malformed delivery headers")
	// ErrSignature: the signature does not match the secret, timestamp,
	// delivery id and body.
	ErrSignature = errors.New("webhookverify: signature does not match")
	// ErrStale: the timestamp is further than the allowed skew from now.
	ErrStale = errors.New("webhookverify: timestamp outside the allowed window")
)

// Delivery is what a verified request's headers say.
type Delivery struct {
	// ID is the delivery id: the same on every retry of one delivery.
	ID string
	// Timestamp is when the attempt was sent (whole seconds).
	Timestamp time.Time
}

// Verify checks a request's signature and that its timestamp is within
// DefaultMaxSkew of now. It does not remember deliveries: use a Verifier to
// refuse a replay within the window too.
func Verify(secret []byte, header http.Header, body []byte, now time.Time) (Delivery, error) {
	return verify(secret, header, body, now, DefaultMaxSkew)
}

func verify(secret []byte, header http.Header, body []byte, now time.Time, maxSkew time.Duration) (Delivery, error) {
	h, err := parseHeaders(header)
	if err != nil {
		return Delivery{}, err
	}
	// Signature first: nothing about an unauthenticated request is trusted.
	if !hmac.Equal(mac(secret, h.timestamp, h.id, body), h.sig) {
		return Delivery{}, ErrSignature
	}
	d := Delivery{ID: h.id, Timestamp: time.Unix(h.unix, 0)}
	if outside(h.unix, now, maxSkew) {
		return d, ErrStale
	}
	return d, nil
}

// outside reports whether Unix second ts is further than maxSkew from now.
func outside(ts int64, now time.Time, maxSkew time.Duration) bool {
	d := now.Sub(time.Unix(ts, 0))
	return d > maxSkew || d < -maxSkew
}

// parsed is a request's delivery headers, syntactically checked.
type parsed struct {
	timestamp string
	unix      int64
	id        string
	sig       []byte
}

// parseHeaders reads the three headers. Each must appear once: with two
// values, a proxy and this code might read different ones.
func parseHeaders(header http.Header) (parsed, error) {
	var p parsed
	ts, err := single(header, HeaderTimestamp)
	if err != nil {
		return p, err
	}
	if p.unix, err = parseTimestamp(ts); err != nil {
		return p, err
	}
	p.timestamp = ts
	if p.id, err = single(header, HeaderDelivery); err != nil {
		return p, err
	}
	if !ValidDeliveryID(p.id) {
		return p, malformed(HeaderDelivery, "not 1 to 256 bytes of printable ASCII without '.'")
	}
	sig, err := single(header, HeaderSignature)
	if err != nil {
		return p, err
	}
	hexSig, ok := strings.CutPrefix(sig, signaturePrefix)
	if !ok || len(hexSig) != 2*sha256.Size {
		return p, malformed(HeaderSignature, "not sha256=<64 hex digits>")
	}
	if p.sig, err = hex.DecodeString(hexSig); err != nil {
		return p, malformed(HeaderSignature, "not sha256=<64 hex digits>")
	}
	return p, nil
}

func single(header http.Header, name string) (string, error) {
	switch v := header.Values(name); len(v) {
	case 0:
		return "", malformed(name, "missing")
	case 1:
		return v[0], nil
	default:
		return "", malformed(name, "repeated")
	}
}

// parseTimestamp accepts decimal digits only (no sign, no space): the
// signed string must not contain '.', and one value has one spelling less
// to think about.
func parseTimestamp(ts string) (int64, error) {
	if ts == "" || len(ts) > 18 {
		return 0, malformed(HeaderTimestamp, "not Unix seconds")
	}
	for i := 0; i < len(ts); i++ {
		if ts[i] < '0' || ts[i] > '9' {
			return 0, malformed(HeaderTimestamp, "not Unix seconds")
		}
	}
	return strconv.ParseInt(ts, 10, 64) // 18 digits cannot overflow
}

type malformedError struct{ header, why string }

func (e malformedError) Error() string {
	return "webhookverify: header " + e.header + ": " + e.why
}

func (e malformedError) Unwrap() error { return ErrMalformed }

func malformed(header, why string) error { return malformedError{header: header, why: why} }
