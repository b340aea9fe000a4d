package repair

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Signing of the agent's repair API.
//
// The gateway signs every request with an Ed25519 private key; agents hold
// only the public key. An HMAC secret would do the signing too, but every
// agent would hold it, and an attacker who owns one node would read it and
// sign requests to every other node ("reset GPU 3 of node-b"). With a
// public key an agent can check a request and cannot make one: taking a
// node gives nothing to use against the others. The node a request is for
// is signed as well, so a request signed for node-a cannot be replayed to
// node-b, and a request id and a timestamp are signed, so a captured
// request cannot be sent again (docs/security.md, "Repair actions (agent
// side)").
//
// The signed string is the lines (LF-separated, no trailing LF)
//
//	SignatureVersion
//	method            e.g. POST
//	request URI       path and query as sent, e.g. /v1/repair/gpu_reset
//	node              HeaderNode
//	timestamp         HeaderTimestamp, Unix seconds in decimal
//	request id        HeaderRequestID
//	body digest       lower-case hex SHA-256 of the body (of nothing for GET)
//
// and the signature travels base64 (standard, padded) after "ed25519=" in
// HeaderSignature. No field may contain a line break (the header checks
// refuse one), so the string has one reading.

// Header names of a signed request. Each must appear exactly once.
const (
	HeaderSignature = "X-Otelcol-Gpu-Repair-Signature"
	HeaderTimestamp = "X-Otelcol-Gpu-Repair-Timestamp"
	// HeaderRequestID names this HTTP request: new on every attempt, even a
	// retry (the replay cache refuses an id seen before). A retry of a job
	// keeps the job's id in the body (GPUResetRequest.ID), which is what
	// makes it idempotent.
	HeaderRequestID = "X-Otelcol-Gpu-Repair-Request-Id"
	// HeaderNode is the node the request is for; an agent refuses any
	// other node's.
	HeaderNode = "X-Otelcol-Gpu-Repair-Node"
)

// SignatureVersion is the first line of the signed string.
const SignatureVersion = "otelcol-gpu-repair-v1"

// DefaultMaxSkew is how far from the agent's clock a timestamp may be.
const DefaultMaxSkew = 5 * time.Minute

// MaxIDLen bounds request and job ids; MaxNodeLen a node name (a DNS name).
const (
	MaxIDLen   = 128
	MaxNodeLen = 253
)

const signaturePrefix = "ed25519="

// Errors of Verify, wrapped with detail; test with errors.Is.
var (
	// ErrMalformed: a header is missing, repeated or not in its format.
	ErrMalformed = errors.New("repair: malformed request signature headers")
	// ErrSignature: no key of the verifier signed this request.
	ErrSignature = errors.New("repair: signature does not verify")
	// ErrStale: the timestamp is further from now than the allowed skew.
	ErrStale = errors.New("repair: timestamp outside the allowed window")
	// ErrReplay: the request id was accepted before within the window.
	ErrReplay = errors.New("repair: request id already seen")
	// ErrReplayFull: the replay cache holds as many ids as it may and none
	// has left the window; the request is refused rather than an id
	// forgotten while a replay of it would still pass the timestamp check.
	ErrReplayFull = errors.New("repair: replay cache full; request refused")
)

// ValidID reports whether id may be a request or job id: 1 to MaxIDLen
// bytes of ASCII letters, digits and "-_.:". Ids travel in paths
// (PathJobs + id) and headers, so they need no escaping anywhere.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == ':'
}

// ValidNode reports whether node may name a node: 1 to MaxNodeLen bytes of
// ASCII letters, digits and "-_.", what a host or Kubernetes node name is
// made of. The client puts it in a URL's host, so nothing else is allowed.
func ValidNode(node string) bool {
	if node == "" || len(node) > MaxNodeLen {
		return false
	}
	for i := 0; i < len(node); i++ {
		if c := node[i]; !idByte(c) || c == ':' {
			return false
		}
	}
	return true
}

// signedString is the one definition of what is signed.
func signedString(method, requestURI, node, timestamp, requestID string, body []byte) []byte {
	sum := sha256.Sum256(body)
	var b strings.Builder
	b.Grow(len(SignatureVersion) + len(method) + len(requestURI) + len(node) + len(timestamp) + len(requestID) + 2*sha256.Size + 6)
	for _, s := range []string{SignatureVersion, method, requestURI, node, timestamp, requestID} {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	b.WriteString(hex.EncodeToString(sum[:]))
	return []byte(b.String())
}

// Signer signs requests with the gateway's private key.
type Signer struct {
	key ed25519.PrivateKey
}

// NewSigner returns a Signer for key.
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("repair: an Ed25519 private key has %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	}
	return &Signer{key: key}, nil
}

// Public returns the public key agents verify with.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign sets the signature headers on req for node, requestID and body (the
// exact bytes req sends; nil for none) at now. It signs req.Method and
// req.URL.RequestURI(), so req must not be changed afterwards.
func (s *Signer) Sign(req *http.Request, node, requestID string, body []byte, now time.Time) error {
	if !ValidNode(node) {
		return fmt.Errorf("repair: signing: node %q is not a valid node name", node)
	}
	if !ValidID(requestID) {
		return fmt.Errorf("repair: signing: request id %q is not 1 to %d of [A-Za-z0-9-_.:]", requestID, MaxIDLen)
	}
	if req.Method == "" || strings.ContainsAny(req.Method, "\r\n") {
		return fmt.Errorf("repair: signing: method %q", req.Method)
	}
	uri := req.URL.RequestURI()
	if strings.ContainsAny(uri, "\r\n") {
		return fmt.Errorf("repair: signing: request URI %q has a line break", uri)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := ed25519.Sign(s.key, signedString(req.Method, uri, node, ts, requestID, body))
	req.Header.Set(HeaderNode, node)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderRequestID, requestID)
	req.Header.Set(HeaderSignature, signaturePrefix+base64.StdEncoding.EncodeToString(sig))
	return nil
}

// Signed is what a verified request's headers say.
type Signed struct {
	Node      string
	RequestID string
	Timestamp time.Time
}

// headers are a request's signature headers, syntactically checked.
type headers struct {
	node, timestamp, id string
	unix                int64
	sig                 []byte
}

func parseHeaders(h http.Header) (headers, error) {
	var p headers
	var err error
	if p.node, err = single(h, HeaderNode); err != nil {
		return p, err
	}
	if !ValidNode(p.node) {
		return p, malformed(HeaderNode, "not a node name")
	}
	if p.timestamp, err = single(h, HeaderTimestamp); err != nil {
		return p, err
	}
	if p.unix, err = parseTimestamp(p.timestamp); err != nil {
		return p, err
	}
	if p.id, err = single(h, HeaderRequestID); err != nil {
		return p, err
	}
	if !ValidID(p.id) {
		return p, malformed(HeaderRequestID, "not 1 to 128 of [A-Za-z0-9-_.:]")
	}
	sig, err := single(h, HeaderSignature)
	if err != nil {
		return p, err
	}
	b64, ok := strings.CutPrefix(sig, signaturePrefix)
	if !ok || len(b64) != base64.StdEncoding.EncodedLen(ed25519.SignatureSize) {
		return p, malformed(HeaderSignature, "not ed25519=<base64 of 64 bytes>")
	}
	if p.sig, err = base64.StdEncoding.Strict().DecodeString(b64); err != nil || len(p.sig) != ed25519.SignatureSize {
		return p, malformed(HeaderSignature, "not ed25519=<base64 of 64 bytes>")
	}
	return p, nil
}

// single returns the one value of a header: with two, a proxy and this
// code might read different ones.
func single(h http.Header, name string) (string, error) {
	switch v := h.Values(name); len(v) {
	case 0:
		return "", malformed(name, "missing")
	case 1:
		return v[0], nil
	default:
		return "", malformed(name, "repeated")
	}
}

// parseTimestamp accepts 1 to 18 decimal digits (no sign, no space): one
// spelling per value, and no overflow.
func parseTimestamp(ts string) (int64, error) {
	if ts == "" || len(ts) > 18 {
		return 0, malformed(HeaderTimestamp, "not Unix seconds")
	}
	for i := 0; i < len(ts); i++ {
		if ts[i] < '0' || ts[i] > '9' {
			return 0, malformed(HeaderTimestamp, "not Unix seconds")
		}
	}
	return strconv.ParseInt(ts, 10, 64)
}

type malformedError struct{ header, why string }

func (e malformedError) Error() string { return "repair: header " + e.header + ": " + e.why }
func (e malformedError) Unwrap() error { return ErrMalformed }

func malformed(header, why string) error { return malformedError{header: header, why: why} }

// outside reports whether Unix second ts is further than maxSkew from now.
func outside(ts int64, now time.Time, maxSkew time.Duration) bool {
	d := now.Sub(time.Unix(ts, 0))
	return d > maxSkew || d < -maxSkew
}
