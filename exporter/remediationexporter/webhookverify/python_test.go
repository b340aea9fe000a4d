package webhookverify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/webhookverify"
)

// readmePython returns the README's Python verify_delivery, so the
// documented function is the tested one.
func readmePython(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	for _, block := range strings.Split(string(readme), "```python\n")[1:] {
		code, _, ok := strings.Cut(block, "```")
		if ok && strings.Contains(code, "def verify_delivery(") {
			assert.LessOrEqual(t, strings.Count(strings.TrimSpace(code), "\n")+1, 10, "the README promises ten lines")
			return code
		}
	}
	t.Fatal("README.md has no ```python block with def verify_delivery")
	return ""
}

// pyCase is one call of verify_delivery.
type pyCase struct {
	Name    string            `json:"name"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Now     float64           `json:"now"`
	Want    bool              `json:"want"`
}

// The README's Python function accepts a delivery the exporter's client
// signed and rejects the forgeries Verify rejects. python3 is required:
// CI has it, and a missing one fails the test rather than skip it.
func TestREADMEPythonVerifiesAGoDelivery(t *testing.T) {
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is needed to test the README's Python verifier")

	const secret = "s3cret"
	at := time.Unix(1741944435, 0)
	var got http.Header
	var body []byte
	srv := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		got = req.Header.Clone()
		body, _ = io.ReadAll(req.Body)
	}))
	defer srv.Close()
	c := webhook.New(webhook.Config{Endpoint: srv.URL, Secret: secret, Timeout: 5 * time.Second},
		webhook.Options{Now: func() time.Time { return at }, Transport: srv.Client().Transport})
	defer c.Close()
	sent := []byte(`{"route":"page","fault":{"fault.id":"a07573c9c14f1fae","fault.severity":"P1"},"sent_at":"2025-03-14T09:27:15Z"}`)
	_, err = c.Send(context.Background(), sent, "a07573c9c14f1fae/open/notify")
	require.NoError(t, err)
	require.Equal(t, sent, body)
	_, err = webhookverify.Verify([]byte(secret), got, body, at)
	require.NoError(t, err, "Go accepts it too")

	h := func(edit func(map[string]string)) map[string]string {
		m := map[string]string{}
		for _, k := range []string{webhookverify.HeaderTimestamp, webhookverify.HeaderDelivery, webhookverify.HeaderSignature} {
			m[k] = got.Get(k)
		}
		if edit != nil {
			edit(m)
		}
		return m
	}
	now := float64(at.Unix())
	cut := bytes.IndexByte(body, '.')
	cases := []pyCase{
		{Name: "valid", Headers: h(nil), Body: string(body), Now: now + 10, Want: true},
		{Name: "new delivery id, old signature", Headers: h(func(m map[string]string) {
			m[webhookverify.HeaderDelivery] = "a07573c9c14f1fae/open/restart_app"
		}), Body: string(body), Now: now},
		{Name: "old timestamp", Headers: h(nil), Body: string(body), Now: now + 301},
		{Name: "tampered body", Headers: h(nil), Body: strings.Replace(string(body), "P1", "P4", 1), Now: now},
		{Name: "re-cut id and body", Headers: h(func(m map[string]string) {
			m[webhookverify.HeaderDelivery] += "." + string(body[:cut])
		}), Body: string(body[cut+1:]), Now: now},
		{Name: "signed timestamp", Headers: h(func(m map[string]string) {
			m[webhookverify.HeaderTimestamp] = "+" + m[webhookverify.HeaderTimestamp]
		}), Body: string(body), Now: now},
	}
	in, err := json.Marshal(cases)
	require.NoError(t, err)
	script := readmePython(t) + `
import json, sys
for c in json.load(sys.stdin):
    print(json.dumps(verify_delivery(b"` + secret + `", c["headers"], c["body"].encode(), c["now"])))
`
	cmd := exec.Command(python, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "python3: %s", stderr.String())
	lines := strings.Fields(string(out))
	require.Len(t, lines, len(cases), "python3 output: %s", out)
	for i, c := range cases {
		assert.Equal(t, map[bool]string{true: "true", false: "false"}[c.Want], lines[i], c.Name)
	}
}
