package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// A standby with forward on sends a control (release, breaker reset,
// acknowledge) to the console the owner advertises to the gpu_faults
// group, instead of refusing it: same method, path, query and body, the
// caller's Authorization (the owner checks the token as always), and
// HeaderForwardedBy naming this standby. The owner's answer is relayed.
// A control that already carries HeaderForwardedBy is never forwarded
// again: a replica that is not the owner either answers 409. While the
// owner is unknown (electing) the standby answers 503. Reads stay local:
// a heatmap lives on the replica whose partition holds the job.

const (
	// maxRelayBytes bounds the owner's answer relayed (a control's answer
	// is a fault or less).
	maxRelayBytes = 1 << 20
	// maxForwardedForLen bounds HeaderForwardedFor (an address).
	maxForwardedForLen = 256
	// forwardDialTimeout bounds the connection to the owner.
	forwardDialTimeout = 5 * time.Second
)

// forwarder is the HTTP client of forwarded controls.
type forwarder struct {
	client *http.Client
}

// newForwarder builds the client from forward's settings (at Start: the
// CA is read there).
func newForwarder(ctx context.Context, cfg ForwardConfig) (*forwarder, error) {
	tlsCfg, err := cfg.TLS.LoadTLSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("forward::tls: %w", err)
	}
	tr := &http.Transport{
		Proxy:                  nil, // the token goes to the owner and nowhere else
		DialContext:            (&net.Dialer{Timeout: forwardDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:        tlsCfg,
		TLSHandshakeTimeout:    forwardDialTimeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           4,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
	}
	return &forwarder{client: &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		// An owner's console never redirects; following one would send
		// the token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// close drops the idle connections (at Shutdown).
func (f *forwarder) close() { f.client.CloseIdleConnections() }

// control wraps a control route: on the owner (or with no controller) h
// serves it; on any other replica a control already forwarded is refused
// (409), and with forward on the control goes to the owner; with forward
// off h refuses it naming the owner.
func (a *api) control(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := a.store.controller()
		if err != nil {
			h(w, r)
			return
		}
		role := c.Role()
		switch {
		case role.Role == ownership.RoleOwner:
			h(w, r)
		case r.Header.Get(consoleclient.HeaderForwardedBy) != "":
			a.forwardLoop(w, r, role)
		case a.fwd != nil:
			a.forward(w, r, role)
		default:
			h(w, r)
		}
	}
}

// refusedForward counts a control this standby could not forward under
// reason and answers code with msg, its role and the owner.
func (a *api) refusedForward(w http.ResponseWriter, r *http.Request, role console.Role, code int, reason, msg string) {
	a.opts.Telemetry.FaultconsoleRefusedRequests.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrReason, reason),
	)))
	a.opts.Logger.Warn("faultconsole: control not forwarded to the owner", zap.String("reason", reason),
		zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr),
		zap.String("owner", role.Owner.String()), zap.String("error", msg))
	writeJSON(w, code, consoleclient.Error{Error: msg, Role: string(role.Role), Owner: wireMember(role.Owner)})
}

// selfName is this replica's name in messages.
func selfName(role console.Role) string {
	if role.Self.Name == "" {
		return "this replica"
	}
	return role.Self.Name
}

// forwardLoop refuses a control another replica forwarded here although
// this one is not the owner either: forwarded once, never again.
func (a *api) forwardLoop(w http.ResponseWriter, r *http.Request, role console.Role) {
	by := clip(r.Header.Get(consoleclient.HeaderForwardedBy), ownership.MaxNameLen)
	msg := fmt.Sprintf("%s received a control forwarded by %q but does not own gpu_faults either (%s): a forwarded control is never forwarded again",
		selfName(role), by, role.Role)
	if role.Owner.Name != "" {
		msg += "; " + role.Owner.Name + " owns gpu_faults"
	}
	a.refusedForward(w, r, role, http.StatusConflict, "forward_loop", msg)
}

// forward sends the control to the owner's console and relays its answer.
func (a *api) forward(w http.ResponseWriter, r *http.Request, role console.Role) {
	owner := role.Owner
	switch {
	case owner.Name == "" && role.Role == ownership.RoleStandby:
		a.refusedForward(w, r, role, http.StatusServiceUnavailable, "owner_unknown", selfName(role)+
			" is a standby and does not know which replica owns gpu_faults (its group leader named none): the control cannot be forwarded; try again in a few seconds")
		return
	case owner.Name == "":
		a.refusedForward(w, r, role, http.StatusServiceUnavailable, "owner_unknown", selfName(role)+
			" does not own gpu_faults and the election of its owner is in progress: the control cannot be forwarded yet; try again in a few seconds")
		return
	case owner.Console == "":
		a.refusedForward(w, r, role, http.StatusServiceUnavailable, "owner_unknown", fmt.Sprintf(
			"%s is a standby: %s owns gpu_faults but advertises no console URL (its gpu_faults receiver's console_url), so the control cannot be forwarded; send it to the owner's console",
			selfName(role), owner.Name))
		return
	}
	target, err := forwardURL(owner.Console, r.URL)
	if err != nil {
		a.refusedForward(w, r, role, http.StatusBadGateway, "forward_failed", fmt.Sprintf("%s is a standby: %s owns gpu_faults but %v", selfName(role), owner.Name, err))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			a.opts.Telemetry.FaultconsoleRefusedRequests.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
				attribute.String(metadata.TelemetryAttrReason, "body_too_large"),
			)))
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", maxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.fwd.client.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, target, bytes.NewReader(body))
	if err != nil {
		a.refusedForward(w, r, role, http.StatusBadGateway, "forward_failed", fmt.Sprintf("forwarding to the owner %s: %v", owner, err))
		return
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept"} {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[h] = v
		}
	}
	req.Header.Set(consoleclient.HeaderForwardedBy, selfName(role))
	req.Header.Set(consoleclient.HeaderForwardedFor, r.RemoteAddr)
	resp, err := a.fwd.client.Do(req)
	if err != nil {
		a.refusedForward(w, r, role, http.StatusBadGateway, "forward_failed", fmt.Sprintf(
			"%s is a standby and forwarded the control to the owner %s, which did not answer: %v; if the owner is failing over, try again in a few seconds",
			selfName(role), owner, err))
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxRelayBytes+1))
	switch {
	case err != nil:
		a.refusedForward(w, r, role, http.StatusBadGateway, "forward_failed", fmt.Sprintf("reading the answer of the owner %s: %v; it may or may not have acted: check its audit", owner, err))
		return
	case len(answer) > maxRelayBytes:
		a.refusedForward(w, r, role, http.StatusBadGateway, "forward_failed", fmt.Sprintf("the owner %s answered more than %d bytes; it may or may not have acted: check its audit", owner, maxRelayBytes))
		return
	}
	h := w.Header()
	for _, k := range []string{"Content-Type", "WWW-Authenticate"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("Cache-Control", "no-store")
	h.Set(consoleclient.HeaderForwardedTo, owner.Name)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	a.opts.Telemetry.FaultconsoleForwardedRequests.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrRoute, routeOf(r)),
		attribute.Int(metadata.TelemetryAttrCode, resp.StatusCode),
	)))
	a.opts.Logger.Info("faultconsole: control forwarded to the owner", zap.String("method", r.Method), zap.String("path", r.URL.Path),
		zap.String("remote", r.RemoteAddr), zap.String("owner", owner.String()), zap.Int("code", resp.StatusCode))
}

// routeOf is the request's route pattern without the method.
func routeOf(r *http.Request) string {
	if _, path, ok := strings.Cut(r.Pattern, " "); ok {
		return path
	}
	return "unmatched"
}

// forwardURL is the owner's console URL with the request's path and query.
// The URL is what the owner advertised to the group: http(s), a host, no
// credentials; plain http only to a loopback address (the token would
// cross the network in clear).
func forwardURL(console string, u *url.URL) (string, error) {
	base, err := url.Parse(console)
	switch {
	case err != nil:
		return "", fmt.Errorf("advertises console URL %q, which does not parse: %v", console, err)
	case (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.User != nil || base.RawQuery != "" || base.Fragment != "":
		return "", fmt.Errorf("advertises console URL %q, not http(s)://host:port", console)
	case base.Scheme == "http" && !loopback(base.Hostname()):
		return "", fmt.Errorf("advertises a plain-HTTP console URL %q off loopback: a control is forwarded with its bearer token over HTTPS only", console)
	}
	return strings.TrimSuffix(base.String(), "/") + u.RequestURI(), nil
}

// forwardedFrom reads the headers of a forwarded control into op; an
// error names a header that is not a name or an address.
func forwardedFrom(r *http.Request, op *console.Operator) error {
	by := r.Header.Get(consoleclient.HeaderForwardedBy)
	if by == "" {
		return nil
	}
	printable := func(s string) bool {
		return strings.IndexFunc(s, func(c rune) bool { return !unicode.IsPrint(c) || unicode.IsSpace(c) }) < 0
	}
	if len(by) > ownership.MaxNameLen || !printable(by) {
		return fmt.Errorf("%s must be a replica's name (at most %d printable bytes without spaces)", consoleclient.HeaderForwardedBy, ownership.MaxNameLen)
	}
	forFor := r.Header.Get(consoleclient.HeaderForwardedFor)
	if len(forFor) > maxForwardedForLen || !printable(forFor) {
		return fmt.Errorf("%s must be an address (at most %d printable bytes without spaces)", consoleclient.HeaderForwardedFor, maxForwardedForLen)
	}
	op.Via, op.ForwardedFor = by, forFor
	return nil
}

// clip cuts s to n bytes for a message.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
