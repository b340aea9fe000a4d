// Package webhookverify verifies the remediation exporter's webhook
// deliveries. A receiver (paging bridge, ticketing, RMA workflow) imports it;
// the exporter signs with Sign from this package, so the signed string has
// one definition.
//
// Every request carries
//
//	X-Otelcol-Gpu-Timestamp: <Unix seconds when the attempt was sent>
//	X-Otelcol-Gpu-Delivery:  <delivery id: the same on every retry of a delivery>
//	X-Otelcol-Gpu-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + delivery + "." + body)>
//
// that is, the HMAC-SHA256 keyed with the shared secret of the bytes
//
//	<timestamp> "." <delivery id> "." <body>
//
// with the header values as sent (ASCII) and the body's raw bytes. Neither
// the timestamp (digits only) nor the delivery id (printable ASCII without
// '.', at most MaxDeliveryIDLen bytes) may contain '.', so the string splits
// one way only: a request cannot be re-cut into another id and body with
// the same signature.
//
// Verify checks the signature and that the timestamp is within
// DefaultMaxSkew of the receiver's clock. The delivery id is signed, so a
// captured request replayed under a new id fails the signature; replayed
// as it is, it passes Verify until its timestamp leaves the window, which
// is what Verifier's store of seen ids refuses (ErrReplay).
package webhookverify // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/webhookverify"
