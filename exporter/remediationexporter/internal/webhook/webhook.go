// Package webhook posts fault records and the exporter's decision to an HTTP
// endpoint (a paging bridge, chat, ticketing, an RMA workflow), signed with
// HMAC-SHA256 and retried with exponential backoff.
//
// Signature (webhookverify.Sign, the one definition): the request carries
//
//	X-Otelcol-Gpu-Timestamp: <Unix seconds when the attempt was sent>
//	X-Otelcol-Gpu-Delivery:  <fault.id>/<fault.state>/<request>: the same on every retry
//	X-Otelcol-Gpu-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + delivery + "." + body)>
//
// Timestamp and delivery id are signed with the body, so a captured request
// cannot be replayed under a new id, nor outside the receiver's window;
// within it, webhookverify.Verifier refuses an id seen before. The
// endpoint must be https:// unless insecure is set: the body names nodes
// and jobs, and a signature does not hide them.
//
// Posts are capped per node, per source on a node and (P1 pages) per node
// in a bucket of their own (limit.go), so one node cannot crowd out others.
package webhook // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/webhookverify"
)

// Header names (webhookverify's).
const (
	HeaderSignature = webhookverify.HeaderSignature
	HeaderTimestamp = webhookverify.HeaderTimestamp
	HeaderDelivery  = webhookverify.HeaderDelivery
)

// Config is the webhook section of the exporter's configuration.
type Config struct {
	// Endpoint is the URL posted to; empty disables the webhook.
	Endpoint string `mapstructure:"endpoint"`
	// Secret keys the HMAC; required with an endpoint.
	Secret configopaque.String `mapstructure:"secret"`
	// Timeout bounds one attempt. Default 5s.
	Timeout time.Duration `mapstructure:"timeout"`
	// Retries after the first attempt on 5xx, 429, timeouts and connection
	// errors. Default 3.
	Retries int `mapstructure:"retries"`
	// Insecure allows an http:// endpoint. Default false: https:// only,
	// since the body names nodes, jobs and faults in clear text.
	Insecure bool `mapstructure:"insecure"`
	// Caps on posts, so one node or one noisy fault type cannot crowd out
	// the others (limit.go). Each is a token bucket refilled over
	// PerNodeWindow; a post over a cap is not sent, but audited and
	// counted. 0: no cap.
	//
	// MaxPostsPerNode: posts about one node (P1 pages excepted). Default 20.
	MaxPostsPerNode int `mapstructure:"max_posts_per_node"`
	// MaxPostsPerSource: posts about one fault type (gpu.xid with its code)
	// on one node, within the node's cap. Default 5.
	MaxPostsPerSource int `mapstructure:"max_posts_per_source"`
	// MaxPagesPerNode: P1 posts (route page) about one node, from a bucket
	// of their own, so lower severities never starve them. Default 10.
	MaxPagesPerNode int `mapstructure:"max_pages_per_node"`
	// PerNodeWindow: an empty bucket is full again after it. Default 10m.
	PerNodeWindow time.Duration `mapstructure:"per_node_window"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// NewDefaultConfig returns the section's defaults (no endpoint: disabled).
func NewDefaultConfig() Config {
	return Config{
		Timeout: 5 * time.Second, Retries: 3,
		MaxPostsPerNode: 20, MaxPostsPerSource: 5, MaxPagesPerNode: 10, PerNodeWindow: 10 * time.Minute,
	}
}

// capped reports whether any cap is set.
func (c Config) capped() bool {
	return c.MaxPostsPerNode > 0 || c.MaxPostsPerSource > 0 || c.MaxPagesPerNode > 0
}

// Validate checks the section.
func (c Config) Validate() error {
	var errs []error
	if c.Endpoint != "" {
		if c.Secret == "" {
			errs = append(errs, errors.New("webhook.secret is required with an endpoint"))
		}
		req, err := http.NewRequest(http.MethodPost, c.Endpoint, http.NoBody)
		switch {
		case err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Host == "":
			errs = append(errs, fmt.Errorf("webhook.endpoint %q is not an http(s) URL", c.Endpoint))
		case req.URL.Scheme == "http" && !c.Insecure:
			errs = append(errs, fmt.Errorf("webhook.endpoint %q is http://: use https://, or set webhook.insecure: true", c.Endpoint))
		}
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("webhook.timeout must be positive"))
	}
	if c.Retries < 0 {
		errs = append(errs, errors.New("webhook.retries must not be negative"))
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"max_posts_per_node", c.MaxPostsPerNode}, {"max_posts_per_source", c.MaxPostsPerSource}, {"max_pages_per_node", c.MaxPagesPerNode}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("webhook.%s %d must not be negative (0: no cap)", f.key, f.v))
		}
	}
	if c.capped() && c.PerNodeWindow <= 0 {
		errs = append(errs, fmt.Errorf("webhook.per_node_window %s must be positive with a cap set", c.PerNodeWindow))
	}
	return errors.Join(errs...)
}

// Options are the client's knobs that are not configuration.
type Options struct {
	// InitialBackoff doubles after each failed attempt up to MaxBackoff.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Sleep waits between attempts; nil waits on a timer, honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now stamps attempts; nil is time.Now.
	Now func() time.Time
	// Transport sends the requests; nil is http.DefaultTransport (tests
	// pass an httptest TLS server's, which trusts its certificate).
	Transport http.RoundTripper
	// PostsCapped counts posts refused by the caps, by reason
	// (metadata.TelemetryAttrReason); nil counts nothing.
	PostsCapped metric.Int64Counter
}

// Client posts to one endpoint. Safe for concurrent use.
type Client struct {
	cfg     Config
	opts    Options
	http    *http.Client
	limiter *Limiter // nil: no cap set
}

// New returns a client for cfg.
func New(cfg Config, opts Options) *Client {
	if opts.Sleep == nil {
		opts.Sleep = SleepContext
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = time.Second
	}
	if opts.MaxBackoff < opts.InitialBackoff {
		opts.MaxBackoff = opts.InitialBackoff
	}
	c := &Client{cfg: cfg, opts: opts, http: &http.Client{
		Timeout:   cfg.Timeout,
		Transport: opts.Transport,
		// A redirect is answered, not followed: following could resend the
		// signed body to another host, or downgrade https to http.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if cfg.capped() {
		c.limiter = NewLimiter(cfg, opts.Now)
	}
	return c
}

// Admit applies the caps to one post before it is built: a refused post is
// counted here, and the caller audits it and sends nothing. It never
// blocks.
func (c *Client) Admit(ctx context.Context, p Post) Verdict {
	if c.limiter == nil {
		return Verdict{OK: true}
	}
	v := c.limiter.Admit(p)
	if !v.OK && c.opts.PostsCapped != nil {
		c.opts.PostsCapped.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, v.Cap))))
	}
	return v
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// permanentError is a failure that a retry will not change: a 3xx or 4xx
// answer but 429, or a request that cannot be built.
type permanentError struct {
	status int
	err    error // set when no request was sent
}

func (e permanentError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("webhook: %v (not retried)", e.err)
	}
	return fmt.Sprintf("webhook: endpoint answered %d (not retried)", e.status)
}

// Send posts body, retrying transient failures, and returns the number of
// attempts made. A cancelled ctx stops the retries.
func (c *Client) Send(ctx context.Context, body []byte, deliveryID string) (int, error) {
	if !webhookverify.ValidDeliveryID(deliveryID) {
		// Signed as is, an id with '.' could be re-cut into another id and body.
		return 0, permanentError{err: fmt.Errorf("delivery id %q is not 1 to %d bytes of printable ASCII without '.'", deliveryID, webhookverify.MaxDeliveryIDLen)}
	}
	backoff := c.opts.InitialBackoff
	var lastErr error
	for attempt := 1; attempt <= c.cfg.Retries+1; attempt++ {
		lastErr = c.attempt(ctx, body, deliveryID)
		if lastErr == nil {
			return attempt, nil
		}
		var perm permanentError
		if errors.As(lastErr, &perm) || ctx.Err() != nil || attempt == c.cfg.Retries+1 {
			return attempt, lastErr
		}
		if err := c.opts.Sleep(ctx, backoff); err != nil {
			return attempt, errors.Join(lastErr, err)
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
	}
	return c.cfg.Retries + 1, lastErr
}

func (c *Client) attempt(ctx context.Context, body []byte, deliveryID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return permanentError{err: err}
	}
	ts := strconv.FormatInt(c.opts.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderDelivery, deliveryID)
	req.Header.Set(HeaderSignature, webhookverify.Sign([]byte(c.cfg.Secret), ts, deliveryID, body))
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("webhook: endpoint answered %d", resp.StatusCode)
	default:
		return permanentError{status: resp.StatusCode}
	}
}

// SleepContext waits d or until ctx is done.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
