package consoleclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientRequests(t *testing.T) {
	type seen struct{ method, uri, auth, contentType, body string }
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, r.RequestURI, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(body)})
		switch r.URL.EscapedPath() {
		case "/api/v1/faults/a%2Fb":
			http.Error(w, "plain text failure", http.StatusBadGateway)
		case "/api/v1/nodes":
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(Error{Error: "no remediation exporter"})
		default:
			_, _ = w.Write([]byte(`{"node":"n/1","detail":"done"}`))
		}
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/", Token: "tok"}
	ctx := context.Background()

	rel, raw, err := c.Release(ctx, "n/1", Action{Operator: "al", Reason: "why"})
	require.NoError(t, err)
	assert.Equal(t, Release{Node: "n/1", Detail: "done"}, rel)
	assert.JSONEq(t, `{"node":"n/1","detail":"done"}`, string(raw))
	// The path is escaped; a negative attempt asks for the highest.
	_, _, err = c.Heatmap(ctx, "job x", 3)
	require.NoError(t, err)
	_, _, err = c.Heatmap(ctx, "job x", -1)
	require.NoError(t, err)

	_, _, err = c.Fault(ctx, "a/b")
	var apiErr *APIError
	require.True(t, errors.As(err, &apiErr))
	assert.Equal(t, &APIError{Status: 502, Message: "plain text failure"}, apiErr)
	_, _, err = c.Nodes(ctx)
	assert.EqualError(t, err, "no remediation exporter (HTTP 503)")

	assert.Equal(t, seen{"POST", "/api/v1/nodes/n%2F1/release", "Bearer tok", "application/json", `{"operator":"al","reason":"why"}`}, got[0])
	assert.Equal(t, "/api/v1/jobs/job%20x/heatmap?attempt=3", got[1].uri)
	assert.Equal(t, "/api/v1/jobs/job%20x/heatmap", got[2].uri)
	assert.Equal(t, seen{"GET", "/api/v1/faults/a%2Fb", "Bearer tok", "", ""}, got[3])
}

func TestClientBadURL(t *testing.T) {
	for _, u := range []string{"localhost:8787", "ftp://x", "http://"} {
		_, _, err := (&Client{BaseURL: u}).Status(context.Background())
		assert.ErrorContains(t, err, "must be http://host:port", u)
	}
}
