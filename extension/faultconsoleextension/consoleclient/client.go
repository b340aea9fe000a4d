package consoleclient // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxAnswerBytes bounds an answer read.
const maxAnswerBytes = 64 << 20

// Client calls the fault console's API.
type Client struct {
	// BaseURL is the console's URL (http://host:8787).
	BaseURL string
	// Token is the bearer token.
	Token string
	// HTTP is the client used; nil: one with a 30s timeout.
	HTTP *http.Client
}

// APIError is an error answer of the API. Role and Owner are set on a
// control refused by a replica that does not act (409).
type APIError struct {
	Status  int
	Message string
	Role    string
	Owner   *Member
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// Raw does a request and returns the answer's body; an error answer is an
// *APIError. body (non-nil) is sent as JSON.
func (c *Client) Raw(ctx context.Context, method, path string, body any) ([]byte, error) {
	base, err := url.Parse(strings.TrimRight(c.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("console URL %q must be http://host:port or https://host:port", c.BaseURL)
	}
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling the console at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the console's answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
			if e.Error == "" {
				e.Error = http.StatusText(resp.StatusCode)
			}
		}
		return nil, &APIError{Status: resp.StatusCode, Message: e.Error, Role: e.Role, Owner: e.Owner}
	}
	return data, nil
}

func (c *Client) call(ctx context.Context, method, path string, body, out any) ([]byte, error) {
	data, err := c.Raw(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("decoding the console's answer to %s %s: %w", method, path, err)
	}
	return data, nil
}

// The methods below return the decoded answer and its JSON as sent.

// Status reads GET /api/v1/status.
func (c *Client) Status(ctx context.Context) (Status, []byte, error) {
	var out Status
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/status", nil, &out)
	return out, raw, err
}

// Faults reads GET /api/v1/faults (open ones, or all).
func (c *Client) Faults(ctx context.Context, all bool) (Faults, []byte, error) {
	state := "open"
	if all {
		state = "all"
	}
	var out Faults
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/faults?state="+state, nil, &out)
	return out, raw, err
}

// Fault reads GET /api/v1/faults/{id}.
func (c *Client) Fault(ctx context.Context, id string) (Fault, []byte, error) {
	var out Fault
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/faults/"+url.PathEscape(id), nil, &out)
	return out, raw, err
}

// Ack posts /api/v1/faults/{id}/ack.
func (c *Client) Ack(ctx context.Context, id string, a Action) (Fault, []byte, error) {
	var out Fault
	raw, err := c.call(ctx, http.MethodPost, "/api/v1/faults/"+url.PathEscape(id)+"/ack", a, &out)
	return out, raw, err
}

// Nodes reads GET /api/v1/nodes.
func (c *Client) Nodes(ctx context.Context) (Nodes, []byte, error) {
	var out Nodes
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/nodes", nil, &out)
	return out, raw, err
}

// Node reads GET /api/v1/nodes/{node}: one quarantined node with its
// repair loop's history.
func (c *Client) Node(ctx context.Context, node string) (Node, []byte, error) {
	var out Node
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/nodes/"+url.PathEscape(node), nil, &out)
	return out, raw, err
}

// Release posts /api/v1/nodes/{node}/release.
func (c *Client) Release(ctx context.Context, node string, a Action) (Release, []byte, error) {
	var out Release
	raw, err := c.call(ctx, http.MethodPost, "/api/v1/nodes/"+url.PathEscape(node)+"/release", a, &out)
	return out, raw, err
}

// Breaker reads GET /api/v1/breaker.
func (c *Client) Breaker(ctx context.Context) (Breaker, []byte, error) {
	var out Breaker
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/breaker", nil, &out)
	return out, raw, err
}

// ResetBreaker posts /api/v1/breaker/reset.
func (c *Client) ResetBreaker(ctx context.Context, a Action) (Reset, []byte, error) {
	var out Reset
	raw, err := c.call(ctx, http.MethodPost, "/api/v1/breaker/reset", a, &out)
	return out, raw, err
}

// Jobs reads GET /api/v1/jobs.
func (c *Client) Jobs(ctx context.Context) (Jobs, []byte, error) {
	var out Jobs
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/jobs", nil, &out)
	return out, raw, err
}

// Heatmap reads GET /api/v1/jobs/{job}/heatmap; attempt < 0: the highest.
func (c *Client) Heatmap(ctx context.Context, job string, attempt int64) (Heatmap, []byte, error) {
	path := "/api/v1/jobs/" + url.PathEscape(job) + "/heatmap"
	if attempt >= 0 {
		path += "?attempt=" + strconv.FormatInt(attempt, 10)
	}
	var out Heatmap
	raw, err := c.call(ctx, http.MethodGet, path, nil, &out)
	return out, raw, err
}
