package repair

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxResponseBytes bounds what the client reads of an agent's answer; a
// Job with every check's results is a few KiB.
const MaxResponseBytes = 1 << 20

// MaxRequestBytes bounds a request body; agents refuse larger ones (413).
const MaxRequestBytes = 64 << 10

// NodePlaceholder is replaced with the node name in ClientConfig.URLTemplate.
const NodePlaceholder = "{node}"

// placeholderHost stands for the node in a parsed template.
const placeholderHost = "otelcol-gpu-repair-node-placeholder"

// DefaultClientTimeout bounds one request when ClientConfig.Timeout is 0.
const DefaultClientTimeout = 30 * time.Second

// ClientConfig says how the gateway reaches agents.
type ClientConfig struct {
	// URLTemplate is the agent's base URL with NodePlaceholder for the
	// node, e.g. "https://{node}:8790": a scheme (http or https), a host
	// holding the placeholder, an optional port, no path, query or user.
	URLTemplate string
	// HTTPClient sends the requests, e.g. one built from the collector's
	// confighttp.ClientConfig (ToClient), which carries TLS, proxy and
	// timeouts. Nil: a client over TLS below.
	HTTPClient *http.Client
	// TLS is the TLS configuration when HTTPClient is nil (nil: Go's
	// defaults, the system roots).
	TLS *tls.Config
	// Timeout bounds each request when HTTPClient is nil (0:
	// DefaultClientTimeout). Callers' contexts bound it further.
	Timeout time.Duration
}

// Client calls agents' repair APIs, signing each request.
type Client struct {
	scheme, host string // host holds placeholderHost
	http         *http.Client
	signer       *Signer
	now          func() time.Time
}

// NewClient returns a Client for cfg signing with signer.
func NewClient(cfg ClientConfig, signer *Signer) (*Client, error) {
	if signer == nil {
		return nil, errors.New("repair: client: no signer")
	}
	if strings.Count(cfg.URLTemplate, NodePlaceholder) != 1 {
		return nil, fmt.Errorf("repair: client: url template %q must hold %s once", cfg.URLTemplate, NodePlaceholder)
	}
	// url.Parse refuses braces in a host: parse with a name in their place.
	u, err := url.Parse(strings.Replace(cfg.URLTemplate, NodePlaceholder, placeholderHost, 1))
	if err != nil {
		return nil, fmt.Errorf("repair: client: url template %q: %w", cfg.URLTemplate, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("repair: client: url template %q: scheme must be http or https", cfg.URLTemplate)
	case !strings.Contains(u.Hostname(), placeholderHost):
		return nil, fmt.Errorf("repair: client: url template %q: the host must hold %s once", cfg.URLTemplate, NodePlaceholder)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("repair: client: url template %q: only scheme, host and port are allowed", cfg.URLTemplate)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		timeout := cfg.Timeout
		if timeout <= 0 {
			timeout = DefaultClientTimeout
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS.Clone()
		}
		hc = &http.Client{Transport: tr, Timeout: timeout}
	}
	// Never follow a redirect: the signature covers one node's path, and a
	// redirect elsewhere would carry nothing useful (and hide a misroute).
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{scheme: u.Scheme, host: u.Host, http: &c, signer: signer, now: time.Now}, nil
}

// StatusError is an agent's answer other than 2xx.
type StatusError struct {
	Node   string
	Path   string
	Status int
	// Message is the start of the agent's answer (it says why).
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("repair: node %s: %s: HTTP %d: %s", e.Node, e.Path, e.Status, e.Message)
}

// NodeStatus returns the node's boot id and GPUs.
func (c *Client) NodeStatus(ctx context.Context, node string) (NodeStatus, error) {
	var out NodeStatus
	err := c.do(ctx, node, http.MethodGet, PathNode, nil, &out)
	return out, err
}

// StartGPUReset asks the node to reset one GPU. The returned Job is usually
// pending or running: poll Job until its state is final. A retry with the
// same req.ID returns the same job.
func (c *Client) StartGPUReset(ctx context.Context, node string, req GPUResetRequest) (Job, error) {
	if req.Node != node {
		return Job{}, fmt.Errorf("repair: gpu reset request for node %q sent to %q", req.Node, node)
	}
	if !ValidID(req.ID) {
		return Job{}, fmt.Errorf("repair: gpu reset request id %q is not 1 to %d of [A-Za-z0-9-_.:]", req.ID, MaxIDLen)
	}
	var out Job
	err := c.do(ctx, node, http.MethodPost, PathGPUReset, req, &out)
	return out, err
}

// StartVerify asks the node to verify itself; as StartGPUReset.
func (c *Client) StartVerify(ctx context.Context, node string, req VerifyRequest) (Job, error) {
	if req.Node != node {
		return Job{}, fmt.Errorf("repair: verify request for node %q sent to %q", req.Node, node)
	}
	if !ValidID(req.ID) {
		return Job{}, fmt.Errorf("repair: verify request id %q is not 1 to %d of [A-Za-z0-9-_.:]", req.ID, MaxIDLen)
	}
	var out Job
	err := c.do(ctx, node, http.MethodPost, PathVerify, req, &out)
	return out, err
}

// Confirm asks the node whether its own hardware signals show the fault
// (synchronous: the answer is the Confirmation). Anything but a
// Confirmation with Confirmed true, an error included, means the node did
// not confirm it: repair nothing.
func (c *Client) Confirm(ctx context.Context, node string, req ConfirmRequest) (Confirmation, error) {
	if req.Node != node {
		return Confirmation{}, fmt.Errorf("repair: confirm request for node %q sent to %q", req.Node, node)
	}
	if !ValidID(req.ID) {
		return Confirmation{}, fmt.Errorf("repair: confirm request id %q is not 1 to %d of [A-Za-z0-9-_.:]", req.ID, MaxIDLen)
	}
	var out Confirmation
	err := c.do(ctx, node, http.MethodPost, PathConfirm, req, &out)
	return out, err
}

// Job returns one of the node's jobs. A job the agent no longer holds (it
// restarted, or evicted it) is a *StatusError with Status 404.
func (c *Client) Job(ctx context.Context, node, id string) (Job, error) {
	if !ValidID(id) {
		return Job{}, fmt.Errorf("repair: job id %q is not 1 to %d of [A-Za-z0-9-_.:]", id, MaxIDLen)
	}
	var out Job
	err := c.do(ctx, node, http.MethodGet, PathJobs+id, nil, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, node, method, path string, in, out any) error {
	if !ValidNode(node) {
		return fmt.Errorf("repair: node %q is not a valid node name", node)
	}
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("repair: encoding %s request: %w", path, err)
		}
		if len(body) > MaxRequestBytes {
			return fmt.Errorf("repair: %s request is %d bytes, over the agent's %d", path, len(body), MaxRequestBytes)
		}
	}
	u := url.URL{Scheme: c.scheme, Host: strings.Replace(c.host, placeholderHost, node, 1), Path: path}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("repair: node %s: %s: %w", node, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if err := c.signer.Sign(req, node, newRequestID(), body, c.now()); err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("repair: node %s: %s: %w", node, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("repair: node %s: %s: reading the answer: %w", node, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := string(data)
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
		return &StatusError{Node: node, Path: path, Status: resp.StatusCode, Message: strings.TrimSpace(msg)}
	}
	if len(data) > MaxResponseBytes {
		return fmt.Errorf("repair: node %s: %s: answer over %d bytes", node, path, MaxResponseBytes)
	}
	if err := DecodeStrict(data, out); err != nil {
		return fmt.Errorf("repair: node %s: %s: decoding the answer: %w", node, path, err)
	}
	return nil
}

// newRequestID returns 128 random bits in hex: a fresh id per attempt.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
