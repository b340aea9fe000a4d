package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
)

// The consoles of several replicas: every --server, or each address of a
// name (--all-addresses: the gateways' headless Service). Only the owner
// of gpu_faults acts; the others refuse controls (409, naming it), so the
// command asks every server its role and sends to the owner.

// serverList is the repeatable --server flag (also comma-separated).
type serverList struct {
	urls []string
	set  bool // given on the command line: replaces the environment's
}

func (s *serverList) String() string { return strings.Join(s.urls, ",") }

func (s *serverList) Set(v string) error {
	if !s.set {
		s.urls, s.set = nil, true
	}
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			s.urls = append(s.urls, u)
		}
	}
	return nil
}

// target is one console: its URL as given, and the address dialled when
// it stands for one address of a name ("" dials the URL's host).
type target struct {
	label  string
	client *consoleclient.Client
}

// newHTTP is a client that trusts caFile (the console's certificate or its
// CA; "" the system's) and dials addr when not empty, keeping the URL's
// host for TLS and Host.
func newHTTP(caFile, addr string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %q holds no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if addr != "" {
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}, nil
}

// targets builds the consoles to ask: each server, or with allAddresses
// each address its host resolves to.
func targets(ctx context.Context, servers []string, allAddresses bool, caFile, token string) ([]target, error) {
	var out []target
	for _, s := range servers {
		u, err := url.Parse(strings.TrimRight(s, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("console URL %q must be http://host:port or https://host:port", s)
		}
		if !allAddresses {
			hc, err := newHTTP(caFile, "")
			if err != nil {
				return nil, err
			}
			out = append(out, target{label: s, client: &consoleclient.Client{BaseURL: s, Token: token, HTTP: hc}})
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		addrs, err := net.DefaultResolver.LookupHost(ctx, u.Hostname())
		if err != nil {
			return nil, fmt.Errorf("--all-addresses: resolving %s: %w", u.Hostname(), err)
		}
		sort.Strings(addrs)
		for _, a := range addrs {
			addr := net.JoinHostPort(a, port)
			hc, err := newHTTP(caFile, addr)
			if err != nil {
				return nil, err
			}
			out = append(out, target{label: s + " [" + addr + "]", client: &consoleclient.Client{BaseURL: s, Token: token, HTTP: hc}})
		}
	}
	return out, nil
}

// answer is one server's status, or why it has none.
type answer struct {
	target
	status consoleclient.Status
	raw    []byte
	err    error
}

// statuses asks every target its status, at once.
func statuses(ctx context.Context, ts []target) []answer {
	out := make([]answer, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].target = t
			out[i].status, out[i].raw, out[i].err = t.client.Status(ctx)
		}()
	}
	wg.Wait()
	return out
}

// errNoOwner: no server said it owns gpu_faults.
var errNoOwner = errors.New("no server is the owner of gpu_faults")

// owner is the one answer whose role is owner; an error lists what each
// server said.
func owner(as []answer) (answer, error) {
	var owners []answer
	var said []string
	for _, a := range as {
		switch {
		case a.err != nil:
			said = append(said, fmt.Sprintf("%s: %v", a.label, a.err))
		case a.status.Role == consoleclient.RoleOwner:
			owners = append(owners, a)
			said = append(said, a.label+": owner")
		default:
			role := a.status.Role
			if role == "" {
				role = "no role (no remediation exporter)"
			}
			if a.status.Owner != nil {
				role += ", names " + a.status.Owner.Name + " as the owner"
			}
			said = append(said, a.label+": "+role)
		}
	}
	switch len(owners) {
	case 1:
		return owners[0], nil
	case 0:
		return answer{}, fmt.Errorf("%w (%s): pass every replica's console (--server, repeatable) or the gateways' headless Service with --all-addresses", errNoOwner, strings.Join(said, "; "))
	}
	return answer{}, fmt.Errorf("%d servers say they own gpu_faults (%s): the group is rebalancing; try again", len(owners), strings.Join(said, "; "))
}
