package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxResponseBytes bounds a slurmrestd answer (all nodes of a 100k-node
// cluster fit).
const maxResponseBytes = 512 << 20

// restTransport talks to slurmrestd: GET /slurm/<v>/node/<n>, /nodes and
// /reservations (every version), POST /slurm/<v>/node/<n> (v0.0.39+).
type restTransport struct {
	base       string // http://host:port, or http://slurmrestd for a socket
	apiVersion string
	user       string
	token      string
	client     *http.Client
	now        func() time.Time
}

func newRestTransport(cfg RestConfig, timeout time.Duration) (*restTransport, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("slurm: slurmrestd.url: %w", err)
	}
	rt := &restTransport{
		apiVersion: cfg.APIVersion,
		user:       cfg.User,
		token:      string(cfg.Token),
		now:        time.Now,
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "unix" {
		socket := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}
		rt.base = "http://slurmrestd"
	} else {
		rt.base = strings.TrimRight(cfg.URL, "/")
	}
	rt.client = &http.Client{Transport: tr, Timeout: timeout}
	return rt, nil
}

// close releases idle connections.
func (r *restTransport) close() { r.client.CloseIdleConnections() }

// restError is one entry of a slurmrestd "errors" list.
type restError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	ErrorNumber int    `json:"error_number"` // v0.0.39+
	Errno       int    `json:"errno"`        // v0.0.38
}

// eslurmInvalidNodeName is ESLURM_INVALID_NODE_NAME.
const eslurmInvalidNodeName = 2018

func (r *restTransport) do(ctx context.Context, method, path string, body, into any) error {
	var reqBody io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reqBody = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+"/slurm/"+r.apiVersion+path, reqBody)
	if err != nil {
		return err
	}
	if r.user != "" {
		req.Header.Set("X-SLURM-USER-NAME", r.user)
	}
	if r.token != "" {
		req.Header.Set("X-SLURM-USER-TOKEN", r.token)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("slurm: slurmrestd %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("slurm: slurmrestd %s %s: %w", method, path, err)
	}
	var envelope struct {
		Errors []restError `json:"errors"`
	}
	_ = json.Unmarshal(raw, &envelope) // an error body may be plain text
	for _, e := range envelope.Errors {
		if e.Errno == eslurmInvalidNodeName || e.ErrorNumber == eslurmInvalidNodeName ||
			isNotFound(e.Error) || isNotFound(e.Description) {
			return errNodeNotFound
		}
	}
	if resp.StatusCode >= 300 || len(envelope.Errors) > 0 {
		detail := strings.TrimSpace(string(raw))
		if len(envelope.Errors) > 0 {
			detail = fmt.Sprintf("%+v", envelope.Errors)
		}
		if len(detail) > 512 {
			detail = detail[:512]
		}
		return fmt.Errorf("slurm: slurmrestd %s %s: HTTP %d: %s", method, path, resp.StatusCode, detail)
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("slurm: slurmrestd %s %s: decoding: %w", method, path, err)
		}
	}
	return nil
}

// flexStrings accepts a string ("idle", v0.0.38) or a list of strings
// (["IDLE","DRAIN"], v0.0.39+).
type flexStrings []string

func (f *flexStrings) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*f = list
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*f = flexStrings{s}
	return nil
}

// flexNumber accepts 1700000000 (v0.0.38) or {"set":true,"number":N}
// (v0.0.40+).
type flexNumber struct {
	Value int64
	Set   bool
}

func (f *flexNumber) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return err
		}
		*f = flexNumber{Value: v, Set: true}
		return nil
	}
	var obj struct {
		Set      bool  `json:"set"`
		Infinite bool  `json:"infinite"`
		Number   int64 `json:"number"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	*f = flexNumber{Value: obj.Number, Set: obj.Set && !obj.Infinite}
	return nil
}

type restNode struct {
	Name            string      `json:"name"`
	State           flexStrings `json:"state"`
	StateFlags      flexStrings `json:"state_flags"` // v0.0.38
	Reason          string      `json:"reason"`
	ReasonChangedAt flexNumber  `json:"reason_changed_at"`
	Gres            string      `json:"gres"`
	AllocCPUs       flexNumber  `json:"alloc_cpus"`
	BootTime        flexNumber  `json:"boot_time"`
}

func (n restNode) info() nodeInfo {
	info := nodeInfo{Name: n.Name, Reason: n.Reason, Gres: n.Gres, CPUAlloc: -1}
	for _, s := range append(append([]string(nil), n.State...), n.StateFlags...) {
		info.States = append(info.States, splitStates(s)...)
	}
	if n.AllocCPUs.Set && n.AllocCPUs.Value >= 0 {
		info.CPUAlloc = int(n.AllocCPUs.Value)
	}
	if n.BootTime.Set && n.BootTime.Value > 0 {
		info.BootTime = time.Unix(n.BootTime.Value, 0)
	}
	if n.ReasonChangedAt.Set && n.ReasonChangedAt.Value > 0 {
		info.ReasonTime = time.Unix(n.ReasonChangedAt.Value, 0)
	}
	return info
}

type restNodes struct {
	Nodes []restNode `json:"nodes"`
}

func (r *restTransport) node(ctx context.Context, name string) (nodeInfo, error) {
	var resp restNodes
	if err := r.do(ctx, http.MethodGet, "/node/"+url.PathEscape(name), nil, &resp); err != nil {
		return nodeInfo{}, err
	}
	for _, n := range resp.Nodes {
		if n.Name == name {
			return n.info(), nil
		}
	}
	return nodeInfo{}, errNodeNotFound
}

func (r *restTransport) nodes(ctx context.Context) ([]nodeInfo, error) {
	var resp restNodes
	if err := r.do(ctx, http.MethodGet, "/nodes", nil, &resp); err != nil {
		return nil, err
	}
	out := make([]nodeInfo, 0, len(resp.Nodes))
	for _, n := range resp.Nodes {
		out = append(out, n.info())
	}
	return out, nil
}

func (r *restTransport) reservations(ctx context.Context) ([]reservation, error) {
	var resp struct {
		Reservations []struct {
			Name      string      `json:"name"`
			NodeList  string      `json:"node_list"`
			Flags     flexStrings `json:"flags"`
			StartTime flexNumber  `json:"start_time"`
			EndTime   flexNumber  `json:"end_time"`
		} `json:"reservations"`
	}
	if err := r.do(ctx, http.MethodGet, "/reservations", nil, &resp); err != nil {
		return nil, err
	}
	now := r.now().Unix()
	out := make([]reservation, 0, len(resp.Reservations))
	for _, rs := range resp.Reservations {
		active := rs.StartTime.Set && rs.StartTime.Value <= now &&
			(!rs.EndTime.Set || now < rs.EndTime.Value)
		flags := make([]string, 0, len(rs.Flags))
		for _, f := range rs.Flags {
			flags = append(flags, strings.ToUpper(f))
		}
		out = append(out, reservation{Name: rs.Name, Nodes: rs.NodeList, Flags: flags, Active: active})
	}
	return out, nil
}

// nodeUpdate is the body of POST /slurm/<v>/node/<n> (update_node_msg).
type nodeUpdate struct {
	State  []string `json:"state"`
	Reason string   `json:"reason,omitempty"`
}

func (r *restTransport) drain(ctx context.Context, name, reason string) error {
	return r.do(ctx, http.MethodPost, "/node/"+url.PathEscape(name), nodeUpdate{State: []string{"DRAIN"}, Reason: reason}, nil)
}

func (r *restTransport) resume(ctx context.Context, name string) error {
	return r.do(ctx, http.MethodPost, "/node/"+url.PathEscape(name), nodeUpdate{State: []string{"RESUME"}}, nil)
}
