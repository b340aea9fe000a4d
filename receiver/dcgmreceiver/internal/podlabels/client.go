package podlabels // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The service account's files, where the kubelet mounts them in every pod
// that has a token (client-go's rest.InClusterConfig reads the same).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// maxTokenBytes bounds a bearer token file (service-account tokens are
// about 1 KiB).
const maxTokenBytes = 64 << 10

// ErrNotInCluster is InClusterConfig's error outside a pod (client-go's
// rest.ErrNotInCluster, the same words).
var ErrNotInCluster = errors.New("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined")

// Config says how to reach the API server: what the pod labels need of
// client-go's rest.Config.
type Config struct {
	// Host is the API server's URL (https://10.96.0.1:443); a bare
	// host:port is taken as https.
	Host string
	// TokenFile holds a bearer token; it is read again when the file
	// changes (bound service-account tokens are rotated by the kubelet)
	// and after the API server answers 401.
	TokenFile string
	// Token is a fixed bearer token, used when TokenFile is empty.
	Token string
	// CAFile and CAData: the CA bundle (PEM) the API server's certificate
	// is checked against; both empty: the system's roots.
	CAFile string
	CAData []byte
	// CertData and KeyData: a client certificate and its key (PEM).
	CertData []byte
	KeyData  []byte
	// UserAgent is sent with each request.
	UserAgent string
}

// InClusterConfig is client-go's rest.InClusterConfig: the API server
// from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, the pod's
// service-account token (its file, re-read when rotated) and CA bundle.
func InClusterConfig() (Config, error) {
	return inClusterConfig(os.Getenv, serviceAccountDir)
}

func inClusterConfig(getenv func(string) string, dir string) (Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, ErrNotInCluster
	}
	tokenFile := filepath.Join(dir, "token")
	if _, err := readToken(tokenFile); err != nil {
		return Config{}, err
	}
	c := Config{Host: "https://" + net.JoinHostPort(host, port), TokenFile: tokenFile}
	// As client-go: a CA bundle that cannot be read leaves the system's
	// roots (the TLS error then says why the watch fails).
	caFile := filepath.Join(dir, "ca.crt")
	if data, err := os.ReadFile(caFile); err == nil {
		if _, err := certPool(data); err == nil {
			c.CAFile = caFile
		}
	}
	return c, nil
}

// Client makes the few requests the Watcher needs (list and watch pods)
// over net/http: no Kubernetes client library.
type Client struct {
	base      *url.URL
	http      *http.Client
	transport *http.Transport
	userAgent string
	token     *tokenSource
	sent      atomic.Int64 // requests sent
}

// NewClient checks c and returns a Client; nothing is sent yet.
func NewClient(c Config) (*Client, error) {
	host := c.Host
	if host == "" {
		return nil, errors.New("podlabels: the API server's host is empty")
	}
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	base, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("podlabels: API server host %q: %w", c.Host, err)
	}
	if base.Scheme != "https" && base.Scheme != "http" {
		return nil, fmt.Errorf("podlabels: API server host %q: scheme %q is not http or https", c.Host, base.Scheme)
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	ca := c.CAData
	if len(ca) == 0 && c.CAFile != "" {
		if ca, err = os.ReadFile(c.CAFile); err != nil {
			return nil, fmt.Errorf("podlabels: CA bundle: %w", err)
		}
	}
	if len(ca) > 0 {
		if tlsConfig.RootCAs, err = certPool(ca); err != nil {
			return nil, fmt.Errorf("podlabels: CA bundle: %w", err)
		}
	}
	if len(c.CertData) > 0 || len(c.KeyData) > 0 {
		cert, err := tls.X509KeyPair(c.CertData, c.KeyData)
		if err != nil {
			return nil, fmt.Errorf("podlabels: client certificate: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	tokens := &tokenSource{file: c.TokenFile, static: c.Token}
	if c.TokenFile != "" {
		if _, err := tokens.get(); err != nil {
			return nil, err
		}
	}
	// client-go's transport settings: proxies from the environment, keep-
	// alives, HTTP/2 with a ping when the connection is quiet (a watch
	// through a dead peer is noticed in about 45 s, not at its timeout).
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
		HTTP2:                 &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
	}
	return &Client{
		base:      base,
		http:      &http.Client{Transport: transport},
		transport: transport,
		userAgent: c.UserAgent,
		token:     tokens,
	}, nil
}

// CloseIdleConnections closes the connections not in use (a stopped
// Watcher's).
func (c *Client) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// StatusError is the API server's answer other than 200: its code and,
// from the Status it sends, reason and message.
type StatusError struct {
	Code    int
	Reason  string
	Message string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%d %s", e.Code, http.StatusText(e.Code))
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// isGone: the resource version asked for is no longer there (410): list
// again.
func isGone(err error) bool {
	var s *StatusError
	return errors.As(err, &s) && s.Code == http.StatusGone
}

// get sends GET path?query and returns the response when it is 200.
func (c *Client) get(ctx context.Context, path string, query url.Values, accept string) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	token, err := c.token.get()
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c.sent.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		c.token.reset() // rotated under us: read the file again next time
	}
	serr := &StatusError{Code: resp.StatusCode}
	var status struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	if body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10)); err == nil && json.Unmarshal(body, &status) == nil {
		serr.Reason, serr.Message = status.Reason, status.Message
	}
	return nil, serr
}

// tokenSource is the bearer token: fixed, or a file read again when it
// changes (the kubelet swaps a projected token's file about hourly) or
// after a 401.
type tokenSource struct {
	file   string
	static string

	mu  sync.Mutex
	fi  os.FileInfo
	tok string
}

func (t *tokenSource) get() (string, error) {
	if t.file == "" {
		return t.static, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fi, err := os.Stat(t.file)
	if err != nil {
		if t.tok != "" {
			return t.tok, nil // as client-go: the last token read while the file is being replaced
		}
		return "", fmt.Errorf("podlabels: bearer token: %w", err)
	}
	if t.fi != nil && os.SameFile(t.fi, fi) && t.fi.ModTime().Equal(fi.ModTime()) && t.fi.Size() == fi.Size() {
		return t.tok, nil
	}
	tok, err := readToken(t.file)
	if err != nil {
		if t.tok != "" {
			return t.tok, nil
		}
		return "", err
	}
	t.fi, t.tok = fi, tok
	return tok, nil
}

func (t *tokenSource) reset() {
	t.mu.Lock()
	t.fi = nil
	t.mu.Unlock()
}

func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("podlabels: bearer token: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("podlabels: bearer token: %w", err)
	}
	if len(b) > maxTokenBytes {
		return "", fmt.Errorf("podlabels: bearer token %s: over %d bytes", path, maxTokenBytes)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("podlabels: bearer token %s: empty", path)
	}
	return tok, nil
}

func certPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}
