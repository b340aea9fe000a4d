package webhookverify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"time"
)

// Header names.
const (
	HeaderSignature = "X-Otelcol-Gpu-Signature"
	HeaderTimestamp = "X-Otelcol-Gpu-Timestamp"
	HeaderDelivery  = "X-Otelcol-Gpu-Delivery"
)

// DefaultMaxSkew is how far from the receiver's clock Verify accepts a
// timestamp.
const DefaultMaxSkew = 5 * time.Minute

// MaxDeliveryIDLen bounds the delivery id, and so what one id costs in a
// Verifier's store.
const MaxDeliveryIDLen = 256

// signaturePrefix names the algorithm in the signature header.
const signaturePrefix = "sha256="

// Sign returns the signature header value for body sent at timestamp (Unix
// seconds, decimal) under deliveryID.
func Sign(secret []byte, timestamp, deliveryID string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, timestamp, deliveryID, body))
}

func mac(secret []byte, timestamp, deliveryID string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	writeSigned(m, timestamp, deliveryID, body)
	return m.Sum(nil)
}

// writeSigned writes the signed string to w: the one definition of it.
func writeSigned(w io.Writer, timestamp, deliveryID string, body []byte) {
	_, _ = io.WriteString(w, timestamp)
	_, _ = w.Write([]byte{'.'})
	_, _ = io.WriteString(w, deliveryID)
	_, _ = w.Write([]byte{'.'})
	_, _ = w.Write(body)
}

// ValidDeliveryID reports whether id may be sent as a delivery id: 1 to
// MaxDeliveryIDLen bytes of printable ASCII other than space and '.'.
func ValidDeliveryID(id string) bool {
	if id == "" || len(id) > MaxDeliveryIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '.' {
			return false
		}
	}
	return true
}
