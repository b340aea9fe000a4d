// Package fakeapi is a Kubernetes API server reduced to what the pod
// labels read, for tests: pods listed with the spec.nodeName field
// selector, in pages with continue tokens, and watched from a resource
// version (ADDED, MODIFIED, DELETED, BOOKMARK, and ERROR 410 for a version
// compacted away), over TLS and HTTP/2, with a bearer token. Its seams:
// end the open watches, lose history (Compact), rotate the token accepted,
// and answer any request (Intercept). It sends whole pods, as an API
// server that does not know PartialObjectMetadata would.
package fakeapi

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Pod is a pod as the server holds it.
type Pod struct {
	Namespace, Name, Node string
	Labels                map[string]string
	Annotations           map[string]string
}

func (p Pod) key() string { return p.Namespace + "/" + p.Name }

type event struct {
	rv  int64
	typ string
	pod Pod
}

// Request is a request the server answered.
type Request struct {
	Watch         bool
	Query         url.Values
	Authorization string
	Accept        string
}

// Server is the fake API server.
type Server struct {
	srv *httptest.Server

	// Intercept, when it returns true, has answered the request itself.
	Intercept func(w http.ResponseWriter, r *http.Request) bool
	// PageSize caps a list's limit (0: the limit asked for).
	PageSize int
	// GoneAsStatus: a watch from a compacted version is answered with HTTP
	// status 410, not a 200 with an ERROR event.
	GoneAsStatus bool

	mu       sync.Mutex
	rv       int64
	pods     map[string]podRec
	history  []event
	oldest   int64 // a watch from an older version is Gone
	token    string
	changed  chan struct{}
	closeNow chan struct{}
	done     chan struct{}
	requests []Request
}

type podRec struct {
	pod Pod
	rv  int64
}

// New starts a server that accepts token ("" for any request); it is
// closed when the test ends.
func New(t testing.TB, token string) *Server {
	s := &Server{rv: 1, pods: map[string]podRec{}, token: token,
		changed: make(chan struct{}), closeNow: make(chan struct{}), done: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// URL is the server's https URL.
func (s *Server) URL() string { return s.srv.URL }

// CAPEM is the CA bundle that verifies the server.
func (s *Server) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// SetToken changes the bearer token accepted.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// Put creates or updates a pod.
func (s *Server) Put(p Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	typ := "ADDED"
	if _, ok := s.pods[p.key()]; ok {
		typ = "MODIFIED"
	}
	s.record(typ, p)
}

// Delete deletes a pod.
func (s *Server) Delete(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.pods[namespace+"/"+name]; ok {
		s.record("DELETED", rec.pod)
	}
}

// Bookmark sends a BOOKMARK at the current version to the open watches.
func (s *Server) Bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = append(s.history, event{rv: s.rv, typ: "BOOKMARK"})
	s.notify()
}

// Compact changes the pods without telling the watches (put, and delete
// the pods namespace/name in del), then forgets the history: a watch from a version before now is
// answered 410 Gone, and only a list sees the change.
func (s *Server) Compact(put []Pod, del []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range put {
		s.rv++
		s.pods[p.key()] = podRec{pod: p, rv: s.rv}
	}
	for _, k := range del {
		delete(s.pods, k)
	}
	s.rv++
	s.history = nil
	s.oldest = s.rv
}

// CloseWatches ends the open watch streams, as a server that restarts or
// ends them at their timeout.
func (s *Server) CloseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.closeNow)
	s.closeNow = make(chan struct{})
}

// ResourceVersion is the server's current version.
func (s *Server) ResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatInt(s.rv, 10)
}

// Requests returns the requests answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Count counts the lists (watch false) or watches answered so far.
func (s *Server) Count(watch bool) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Watch == watch {
			n++
		}
	}
	return n
}

func (s *Server) record(typ string, p Pod) {
	s.rv++
	p.Labels = maps.Clone(p.Labels)
	if typ == "DELETED" {
		delete(s.pods, p.key())
	} else {
		s.pods[p.key()] = podRec{pod: p, rv: s.rv}
	}
	s.history = append(s.history, event{rv: s.rv, typ: typ, pod: p})
	s.notify()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ServeHTTP answers GET /api/v1/pods, list or watch.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	s.mu.Lock()
	s.requests = append(s.requests, Request{Watch: watch, Query: q,
		Authorization: r.Header.Get("Authorization"), Accept: r.Header.Get("Accept")})
	token := s.token
	closeNow := s.closeNow // CloseWatches ends the watches recorded before it
	s.mu.Unlock()
	if s.Intercept != nil && s.Intercept(w, r) {
		return
	}
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		Status(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/pods" {
		Status(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	node := ""
	if sel := q.Get("fieldSelector"); sel != "" {
		var ok bool
		if node, ok = strings.CutPrefix(sel, "spec.nodeName="); !ok {
			Status(w, http.StatusBadRequest, "BadRequest", "field selector not supported: "+sel)
			return
		}
	}
	if watch {
		s.watch(w, r, q, node, closeNow)
		return
	}
	s.list(w, q, node)
}

// Status writes a Kubernetes Status with code.
func Status(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status(code, reason, message))
}

func status(code int, reason, message string) map[string]any {
	return map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": message, "reason": reason, "code": code}
}

func (s *Server) list(w http.ResponseWriter, q url.Values, node string) {
	s.mu.Lock()
	rv, after := s.rv, ""
	if c := q.Get("continue"); c != "" {
		v, key, ok := strings.Cut(c, "/")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			s.mu.Unlock()
			Status(w, http.StatusBadRequest, "BadRequest", "bad continue token")
			return
		}
		rv, after = n, key
	}
	keys := slices.Sorted(maps.Keys(s.pods))
	limit, _ := strconv.Atoi(q.Get("limit"))
	if s.PageSize > 0 && (limit == 0 || limit > s.PageSize) {
		limit = s.PageSize
	}
	var items []any
	cont := ""
	for _, k := range keys {
		rec := s.pods[k]
		if k <= after || (node != "" && rec.pod.Node != node) {
			continue
		}
		if limit > 0 && len(items) == limit {
			cont = strconv.FormatInt(rv, 10) + "/" + after
			break
		}
		items = append(items, podJSON(rec.pod, rec.rv))
		after = k
	}
	s.mu.Unlock()
	if items == nil {
		items = []any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "PodList", "apiVersion": "v1",
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(rv, 10), "continue": cont},
		"items":    items,
	})
}

func podJSON(p Pod, rv int64) map[string]any {
	return map[string]any{
		"kind": "Pod", "apiVersion": "v1",
		"metadata": map[string]any{
			"namespace": p.Namespace, "name": p.Name, "uid": "uid-" + p.key(),
			"resourceVersion": strconv.FormatInt(rv, 10),
			"labels":          p.Labels, "annotations": p.Annotations,
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update"}},
		},
		"spec":   map[string]any{"nodeName": p.Node, "containers": []any{map[string]any{"name": "c", "image": "i"}}},
		"status": map[string]any{"phase": "Running"},
	}
}

func (s *Server) watch(w http.ResponseWriter, r *http.Request, q url.Values, node string, closeNow <-chan struct{}) {
	from, err := strconv.ParseInt(q.Get("resourceVersion"), 10, 64)
	if err != nil {
		Status(w, http.StatusBadRequest, "BadRequest", "resourceVersion: "+err.Error())
		return
	}
	timeout := 10 * time.Minute
	if v, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil {
		timeout = time.Duration(v) * time.Second
	}
	s.mu.Lock()
	gone := from < s.oldest
	oldest, asStatus := s.oldest, s.GoneAsStatus
	s.mu.Unlock()
	msg := fmt.Sprintf("too old resource version: %d (%d)", from, oldest)
	if gone && asStatus {
		Status(w, http.StatusGone, "Expired", msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	if gone {
		_ = enc.Encode(map[string]any{"type": "ERROR", "object": status(http.StatusGone, "Expired", msg)})
		return
	}
	if flusher != nil {
		flusher.Flush()
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	next := 0 // the next history entry to look at
	for {
		s.mu.Lock()
		var out []event
		for ; next < len(s.history); next++ {
			e := s.history[next]
			if e.rv <= from && e.typ != "BOOKMARK" {
				continue
			}
			if e.typ == "BOOKMARK" || node == "" || e.pod.Node == node {
				out = append(out, e)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		for _, e := range out {
			obj := podJSON(e.pod, e.rv)
			if e.typ == "BOOKMARK" {
				obj = map[string]any{"kind": "Pod", "apiVersion": "v1",
					"metadata": map[string]any{"resourceVersion": strconv.FormatInt(e.rv, 10)}}
			}
			if enc.Encode(map[string]any{"type": e.typ, "object": obj}) != nil {
				return
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-changed:
		case <-closeNow:
			return
		case <-end.C:
			return
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
}
