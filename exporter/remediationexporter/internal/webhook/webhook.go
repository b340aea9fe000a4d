// Package webhook posts fault records and the exporter's decision to an HTTP
// endpoint (a paging bridge, chat, ticketing, an RMA workflow), signed with
// HMAC-SHA256 and retried with exponential backoff.
//
// Signature: the request carries
//
//	X-Otelcol-Gpu-Timestamp: <Unix seconds when the attempt was sent>
//	X-Otelcol-Gpu-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//	X-Otelcol-Gpu-Delivery:  <fault.id>/<fault.state>/<request>: the same on every retry
//
// The timestamp is part of the signed bytes, so a receiver that checks the
// signature and rejects timestamps more than a few minutes from its clock
// (Verify, MaxSkew) cannot be made to accept a replayed request; it
// deduplicates retries by the delivery id.
package webhook // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"
)

// Header names.
const (
	HeaderSignature = "X-Otelcol-Gpu-Signature"
	HeaderTimestamp = "X-Otelcol-Gpu-Timestamp"
	HeaderDelivery  = "X-Otelcol-Gpu-Delivery"
)

// MaxSkew is how far from its own clock a receiver should accept a
// timestamp (Verify).
const MaxSkew = 5 * time.Minute

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

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the section.
func (c Config) Validate() error {
	var errs []error
	if c.Endpoint != "" {
		if c.Secret == "" {
			errs = append(errs, errors.New("webhook.secret is required with an endpoint"))
		}
		req, err := http.NewRequest(http.MethodPost, c.Endpoint, http.NoBody)
		if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Host == "" {
			errs = append(errs, fmt.Errorf("webhook.endpoint %q is not an http(s) URL", c.Endpoint))
		}
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("webhook.timeout must be positive"))
	}
	if c.Retries < 0 {
		errs = append(errs, errors.New("webhook.retries must not be negative"))
	}
	return errors.Join(errs...)
}

// Sign returns the signature header value for body sent at timestamp.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a request as a receiver should: the signature over
// timestamp + "." + body, and the timestamp within maxSkew of now.
func Verify(secret []byte, timestamp string, body []byte, signature string, now time.Time, maxSkew time.Duration) error {
	if !hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature)) {
		return errors.New("webhook: bad signature")
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: bad timestamp %q", timestamp)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > maxSkew || d < -maxSkew {
		return fmt.Errorf("webhook: timestamp %s outside ±%s", timestamp, maxSkew)
	}
	return nil
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
}

// Client posts to one endpoint. Safe for concurrent use.
type Client struct {
	cfg  Config
	opts Options
	http *http.Client
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
	return &Client{cfg: cfg, opts: opts, http: &http.Client{Timeout: cfg.Timeout}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// permanentError is a response that a retry will not change (4xx but 429).
type permanentError struct{ status int }

func (e permanentError) Error() string {
	return fmt.Sprintf("webhook: endpoint answered %d (not retried)", e.status)
}

// Send posts body, retrying transient failures, and returns the number of
// attempts made. A cancelled ctx stops the retries.
func (c *Client) Send(ctx context.Context, body []byte, deliveryID string) (int, error) {
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
		return permanentError{}
	}
	ts := strconv.FormatInt(c.opts.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign([]byte(c.cfg.Secret), ts, body))
	req.Header.Set(HeaderDelivery, deliveryID)
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
