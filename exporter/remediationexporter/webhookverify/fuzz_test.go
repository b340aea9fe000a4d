package webhookverify

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// FuzzVerify: any headers and body, no panic; what passes is well formed
// and signed as documented.
func FuzzVerify(f *testing.F) {
	f.Add("1741944435", deliveryID, Sign(secret, "1741944435", deliveryID, body), body)
	f.Add("+1741944435", "a.b", "sha256=", []byte{})
	f.Add("999999999999999999999", "x", "sha256="+string(bytes.Repeat([]byte("0"), 64)), []byte("."))
	f.Fuzz(func(t *testing.T, ts, id, sig string, b []byte) {
		h := http.Header{}
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderDelivery, id)
		h.Set(HeaderSignature, sig)
		sec, perr := strconv.ParseInt(ts, 10, 64)
		now := at
		if perr == nil {
			now = time.Unix(sec, 0) // within the window, so only parsing and signature decide
		}
		d, err := Verify(secret, h, b, now)
		if err != nil {
			return
		}
		if !ValidDeliveryID(d.ID) || d.ID != id || d.Timestamp.Unix() != sec {
			t.Fatalf("accepted %q %q as %+v", ts, id, d)
		}
		for _, c := range ts {
			if c < '0' || c > '9' {
				t.Fatalf("accepted timestamp %q", ts)
			}
		}
		if Sign(secret, ts, id, b) != sig && !equalFoldHex(Sign(secret, ts, id, b), sig) {
			t.Fatalf("accepted a signature Sign does not make: %q", sig)
		}
	})
}

// equalFoldHex: the signature's hex may be upper case.
func equalFoldHex(a, b string) bool { return bytes.EqualFold([]byte(a), []byte(b)) }

// FuzzSignedStringSplitsOneWay: two different (timestamp, id, body) that
// pass the header checks never make the same signed string, so no request
// can be re-cut into another with the same signature.
func FuzzSignedStringSplitsOneWay(f *testing.F) {
	f.Add("1", "a", []byte(".b"), "1", "a.", []byte("b"))
	f.Add("17", "x", []byte("{}"), "1", "7.x", []byte("{}"))
	f.Fuzz(func(t *testing.T, ts1, id1 string, b1 []byte, ts2, id2 string, b2 []byte) {
		if !wellFormed(ts1, id1) || !wellFormed(ts2, id2) {
			return
		}
		if ts1 == ts2 && id1 == id2 && bytes.Equal(b1, b2) {
			return
		}
		var s1, s2 bytes.Buffer
		writeSigned(&s1, ts1, id1, b1)
		writeSigned(&s2, ts2, id2, b2)
		if bytes.Equal(s1.Bytes(), s2.Bytes()) {
			t.Fatalf("(%q %q %q) and (%q %q %q) sign the same string", ts1, id1, b1, ts2, id2, b2)
		}
	})
}

func wellFormed(ts, id string) bool {
	_, err := parseTimestamp(ts)
	return err == nil && ValidDeliveryID(id)
}
