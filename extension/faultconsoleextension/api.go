package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
)

const (
	// maxBodyBytes bounds a POST body.
	maxBodyBytes = 64 << 10
	// controllerTimeout bounds one call into the controller.
	controllerTimeout = 30 * time.Second
	// unauthorizedLogEvery is how often one remote's refused requests are
	// logged.
	unauthorizedLogEvery = time.Minute
	// maxWarnedRemotes bounds the remotes remembered for that.
	maxWarnedRemotes = 1024
	// pagePattern is the only route served without the token.
	pagePattern = "GET /{$}"
)

type apiOptions struct {
	TraceURL  string
	LogsURL   string
	BuildInfo component.BuildInfo
	Logger    *zap.Logger
	Telemetry *metadata.TelemetryBuilder
	Now       func() time.Time
}

// api is the console's HTTP handler: the page at / and the JSON API under
// /api/v1/, every route but the page behind the bearer token.
type api struct {
	store *store
	opts  apiOptions
	mux   *http.ServeMux
	token atomic.Pointer[[sha256.Size]byte]
	csp   string
	// fwd forwards controls from a standby to the owner (forward.go); nil:
	// off. Set at Start, before serving.
	fwd *forwarder

	warnMu sync.Mutex
	warned map[string]time.Time
}

func newAPI(s *store, opts apiOptions) *api {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &api{store: s, opts: opts, mux: http.NewServeMux(), warned: map[string]time.Time{}, csp: pageCSP()}
	a.mux.HandleFunc(pagePattern, a.page)
	a.mux.HandleFunc("GET /api/v1/status", a.status)
	a.mux.HandleFunc("GET /api/v1/faults", a.faults)
	a.mux.HandleFunc("GET /api/v1/faults/{id}", a.fault)
	a.mux.HandleFunc("POST /api/v1/faults/{id}/ack", a.control(a.ack))
	a.mux.HandleFunc("GET /api/v1/nodes", a.nodes)
	a.mux.HandleFunc("GET /api/v1/nodes/{node}", a.node)
	a.mux.HandleFunc("POST /api/v1/nodes/{node}/release", a.control(a.release))
	a.mux.HandleFunc("GET /api/v1/breaker", a.breaker)
	a.mux.HandleFunc("POST /api/v1/breaker/reset", a.control(a.reset))
	a.mux.HandleFunc("GET /api/v1/jobs", a.jobs)
	a.mux.HandleFunc("GET /api/v1/jobs/{job}/heatmap", a.heatmap)
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s: see the README for the API", r.Method, r.URL.Path))
	})
	return a
}

// setToken sets the bearer token (at Start).
func (a *api) setToken(token string) {
	sum := sha256.Sum256([]byte(token))
	a.token.Store(&sum)
}

// statusRecorder keeps the status code written.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := a.mux.Handler(r)
	route := "unmatched"
	if pattern == pagePattern {
		route = "page"
	} else if _, path, ok := strings.Cut(pattern, " "); ok && pattern != "/" {
		route = path
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	defer func() {
		a.opts.Telemetry.FaultconsoleRequests.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
			attribute.String(metadata.TelemetryAttrRoute, route),
			attribute.String(metadata.TelemetryAttrMethod, r.Method),
			attribute.Int(metadata.TelemetryAttrCode, rec.code),
		)))
	}()
	h := rec.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if pattern != pagePattern && !a.authorized(r) {
		a.refuse(rec, r, route)
		return
	}
	a.mux.ServeHTTP(rec, r)
}

// authorized checks the bearer token in constant time.
func (a *api) authorized(r *http.Request) bool {
	want := a.token.Load()
	if want == nil {
		return false
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// refuse answers 401, counts it and logs it at most once a minute per
// remote.
func (a *api) refuse(w http.ResponseWriter, r *http.Request, route string) {
	a.opts.Telemetry.FaultconsoleUnauthorizedRequests.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrRoute, route),
	)))
	remote := r.RemoteAddr
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	now := a.opts.Now()
	a.warnMu.Lock()
	last, seen := a.warned[remote]
	log := !seen || now.Sub(last) >= unauthorizedLogEvery
	if log {
		if len(a.warned) >= maxWarnedRemotes {
			clear(a.warned)
		}
		a.warned[remote] = now
	}
	a.warnMu.Unlock()
	if log {
		a.opts.Logger.Warn("faultconsole: refused an API request without the right bearer token (logged once a minute per remote)",
			zap.String("remote", remote), zap.String("method", r.Method), zap.String("path", r.URL.Path))
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="faultconsole"`)
	writeError(w, http.StatusUnauthorized, "missing or wrong bearer token: send Authorization: Bearer <the token in the console's token_file>")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(consoleclient.Error{Error: "encoding the answer: " + err.Error()})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, consoleclient.Error{Error: msg})
}

// action reads a POST's JSON body; false when it answered an error.
func (a *api) action(w http.ResponseWriter, r *http.Request, reasonRequired bool) (console.Operator, bool) {
	refused := func(code int, reason, msg string) (console.Operator, bool) {
		a.opts.Telemetry.FaultconsoleRefusedRequests.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
			attribute.String(metadata.TelemetryAttrReason, reason),
		)))
		writeError(w, code, msg)
		return console.Operator{}, false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return refused(http.StatusUnsupportedMediaType, "content_type", fmt.Sprintf("Content-Type must be application/json, got %q", r.Header.Get("Content-Type")))
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	var body consoleclient.Action
	if err := dec.Decode(&body); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return refused(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body is larger than %d bytes", maxBodyBytes))
		}
		return refused(http.StatusBadRequest, "bad_body", `body must be a JSON object {"operator": "...", "reason": "..."}: `+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return refused(http.StatusBadRequest, "bad_body", "body must hold one JSON object and nothing after it")
	}
	op := console.Operator{Remote: r.RemoteAddr}
	if err := forwardedFrom(r, &op); err != nil {
		return refused(http.StatusBadRequest, "bad_forward", err.Error())
	}
	body.Operator, body.Reason = strings.TrimSpace(body.Operator), strings.TrimSpace(body.Reason)
	switch {
	case body.Operator == "":
		return refused(http.StatusBadRequest, "bad_body", "operator is required: who is asking (e.g. your user name)")
	case len(body.Operator) > console.MaxOperatorLen:
		return refused(http.StatusBadRequest, "bad_body", fmt.Sprintf("operator is longer than %d bytes", console.MaxOperatorLen))
	case reasonRequired && body.Reason == "":
		return refused(http.StatusBadRequest, "bad_body", "reason is required: say why, it goes to the remediation audit")
	case len(body.Reason) > console.MaxReasonLen:
		return refused(http.StatusBadRequest, "bad_body", fmt.Sprintf("reason is longer than %d bytes", console.MaxReasonLen))
	}
	op.Name, op.Reason = body.Operator, body.Reason
	return op, true
}

func (a *api) status(w http.ResponseWriter, _ *http.Request) {
	st := a.store.counts()
	c, err := a.store.controller()
	out := consoleclient.Status{
		Version:            a.opts.BuildInfo.Version,
		Command:            a.opts.BuildInfo.Command,
		Time:               a.opts.Now().UTC(),
		ControllerAttached: err == nil,
		OpenFaults:         st.OpenFaults,
		ResolvedFaults:     st.ResolvedFaults,
		AcknowledgedFaults: st.Acknowledged,
		Jobs:               st.Jobs,
		EvictedFaults:      st.EvictedFaults,
		EvictedJobs:        st.EvictedJobs,
		DroppedSteps:       st.DroppedSteps,
		TraceLinks:         a.opts.TraceURL != "",
		LogsLinks:          a.opts.LogsURL != "",
		ForwardsControls:   a.fwd != nil,
	}
	if err == nil {
		withRole(&out, c.Role())
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) faults(w http.ResponseWriter, r *http.Request) {
	var all bool
	switch state := r.URL.Query().Get("state"); state {
	case "", console.StateOpen:
	case "all":
		all = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("state must be open or all, got %q", state))
		return
	}
	views := a.store.listFaults(all)
	out := consoleclient.Faults{Faults: make([]consoleclient.Fault, 0, len(views))}
	for _, v := range views {
		out.Faults = append(out.Faults, a.wireFault(v))
	}
	writeJSON(w, http.StatusOK, out)
}

func unknownFault(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("fault %q is unknown to the console (never recorded, or forgotten after resolved_retention or max_faults)", id))
}

func (a *api) fault(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	v, ok := a.store.fault(id)
	if !ok {
		unknownFault(w, id)
		return
	}
	writeJSON(w, http.StatusOK, a.wireFault(v))
}

func (a *api) ack(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	op, ok := a.action(w, r, false)
	if !ok {
		return
	}
	if c, err := a.store.controller(); err == nil && !a.ownerOnly(w, r, c) {
		return
	}
	if _, ok := a.store.fault(id); !ok {
		unknownFault(w, id)
		return
	}
	c, err := a.store.controller()
	if err != nil {
		a.controllerError(w, r, "acknowledging", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), controllerTimeout)
	defer cancel()
	if err := c.Acknowledge(ctx, id, op); err != nil {
		a.controllerError(w, r, "the remediation exporter refused the acknowledgement", err)
		return
	}
	v, ok := a.store.acknowledge(id, op)
	if !ok {
		unknownFault(w, id)
		return
	}
	a.opts.Logger.Info("faultconsole: fault acknowledged", zap.String("fault", id), zap.String("via", op.Via), zap.String("operator", op.Name), zap.String("remote", op.Remote), zap.String("reason", op.Reason))
	writeJSON(w, http.StatusOK, a.wireFault(v))
}

// quarantined lists the controller's nodes sorted by name; false when it
// answered an error.
func (a *api) quarantined(w http.ResponseWriter, r *http.Request) ([]console.QuarantinedNode, console.Controller, bool) {
	c, err := a.store.controller()
	if err != nil {
		a.controllerError(w, r, "listing quarantined nodes", err)
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), controllerTimeout)
	defer cancel()
	nodes, err := c.Quarantined(ctx)
	if err != nil {
		a.controllerError(w, r, "listing quarantined nodes", err)
		return nil, nil, false
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	return nodes, c, true
}

func (a *api) nodes(w http.ResponseWriter, r *http.Request) {
	nodes, _, ok := a.quarantined(w, r)
	if !ok {
		return
	}
	now := a.opts.Now()
	out := consoleclient.Nodes{Nodes: make([]consoleclient.Node, 0, len(nodes))}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, wireNode(n, now))
		if n.Lifecycle != nil {
			out.Steps = lifecycleSteps()
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) release(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	op, ok := a.action(w, r, true)
	if !ok {
		return
	}
	if c, err := a.store.controller(); err == nil && !a.ownerOnly(w, r, c) {
		return
	}
	nodes, c, ok := a.quarantined(w, r)
	if !ok {
		return
	}
	held := false
	for _, n := range nodes {
		held = held || n.Node == node
	}
	if !held {
		writeError(w, http.StatusNotFound, fmt.Sprintf("node %q is not quarantined by the remediation exporter", node))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), controllerTimeout)
	defer cancel()
	detail, err := c.Release(ctx, node, op)
	if err != nil {
		a.controllerError(w, r, "releasing node "+strconv.Quote(node), err)
		return
	}
	a.opts.Logger.Info("faultconsole: node released", zap.String("node", node), zap.String("via", op.Via), zap.String("operator", op.Name), zap.String("remote", op.Remote), zap.String("reason", op.Reason), zap.String("detail", detail))
	writeJSON(w, http.StatusOK, consoleclient.Release{Node: node, Detail: detail})
}

func wireBreaker(b console.Breaker) *consoleclient.Breaker {
	out := &consoleclient.Breaker{
		State: "closed", Tripped: b.Tripped, Used: b.Used, Budget: b.Budget,
		Window: b.Window.String(), WindowSeconds: b.Window.Seconds(),
		History:       make([]consoleclient.BreakerEvent, 0, len(b.History)),
		QuarantineCap: wireQuarantineCap(b.QuarantineCap),
	}
	if b.Tripped {
		out.State = "tripped"
	}
	for _, e := range b.History {
		out.History = append(out.History, consoleclient.BreakerEvent{Time: e.Time.UTC(), Event: e.Event, By: e.By, Reason: e.Reason})
	}
	return out
}

func (a *api) breaker(w http.ResponseWriter, r *http.Request) {
	c, err := a.store.controller()
	if err != nil {
		a.controllerError(w, r, "reading the breaker", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), controllerTimeout)
	defer cancel()
	b, err := c.Breaker(ctx)
	if err != nil {
		a.controllerError(w, r, "reading the breaker", err)
		return
	}
	writeJSON(w, http.StatusOK, wireBreaker(b))
}

func (a *api) reset(w http.ResponseWriter, r *http.Request) {
	op, ok := a.action(w, r, true)
	if !ok {
		return
	}
	c, err := a.store.controller()
	if err != nil {
		a.controllerError(w, r, "resetting the breaker", err)
		return
	}
	if !a.ownerOnly(w, r, c) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), controllerTimeout)
	defer cancel()
	if err := c.ResetBreaker(ctx, op); err != nil {
		a.controllerError(w, r, "resetting the breaker", err)
		return
	}
	a.opts.Logger.Info("faultconsole: breaker reset", zap.String("via", op.Via), zap.String("operator", op.Name), zap.String("remote", op.Remote), zap.String("reason", op.Reason))
	out := consoleclient.Reset{Reset: true}
	if b, err := c.Breaker(ctx); err != nil {
		out.BreakerError = err.Error()
	} else {
		out.Breaker = wireBreaker(b)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) jobs(w http.ResponseWriter, _ *http.Request) {
	jobs := a.store.listJobs()
	out := consoleclient.Jobs{Jobs: make([]consoleclient.Job, 0, len(jobs))}
	for _, j := range jobs {
		wj := consoleclient.Job{
			Job: j.Job, Attempt: j.Attempt, Ranks: j.Ranks, Steps: j.Steps,
			FirstStep: j.FirstStep, LastStep: j.LastStep, Updated: j.Updated.UTC(),
			Stragglers:  make([]consoleclient.RankVerdicts, 0, len(j.Stragglers)),
			NoCommSplit: j.NoCommSplit,
		}
		for _, s := range j.Stragglers {
			wj.Stragglers = append(wj.Stragglers, consoleclient.RankVerdicts{Rank: s.Rank, Node: s.Node, Steps: s.Steps})
		}
		out.Jobs = append(out.Jobs, wj)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) heatmap(w http.ResponseWriter, r *http.Request) {
	job := r.PathValue("job")
	attempt := int64(-1)
	if s := r.URL.Query().Get("attempt"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("attempt must be a non-negative integer, got %q", s))
			return
		}
		attempt = n
	}
	v, ok := a.store.heatmap(job, attempt)
	if !ok {
		what := fmt.Sprintf("job %q", job)
		if attempt >= 0 {
			what = fmt.Sprintf("job %q attempt %d", job, attempt)
		}
		writeError(w, http.StatusNotFound, what+" has no heatmap in the console (no judged steps recorded, or forgotten after max_jobs)")
		return
	}
	out := consoleclient.Heatmap{
		Job: v.Job, Attempt: v.Attempt, Ranks: v.Ranks, Nodes: v.Nodes, Steps: v.Steps,
		ComputeMS: make([][]*float64, len(v.Ranks)), DurationMS: make([][]*float64, len(v.Ranks)),
		Verdicts: []consoleclient.Verdict{}, NoCommSplit: v.NoCommSplit,
	}
	for r, row := range v.Cells {
		compute, duration := make([]*float64, len(row)), make([]*float64, len(row))
		for s, c := range row {
			if !c.present {
				continue
			}
			cm, dm := float64(c.computeMS), float64(c.durationMS)
			compute[s], duration[s] = &cm, &dm
			if c.verdict != 0 {
				out.Verdicts = append(out.Verdicts, consoleclient.Verdict{Rank: v.Ranks[r], Step: v.Steps[s], Verdict: v.Verdicts[c.verdict], Score: float64(c.score)})
			}
		}
		out.ComputeMS[r], out.DurationMS[r] = compute, duration
	}
	writeJSON(w, http.StatusOK, out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a *api) wireFault(v faultView) consoleclient.Fault {
	f := v.Fault
	out := consoleclient.Fault{
		ID: f.ID, Type: f.Type, Severity: f.Severity, State: f.State, Node: f.Node, GPU: f.GPU,
		Job: f.Job, Attempt: f.Attempt, Rank: f.Rank, Step: f.Step,
		FirstSeen: f.FirstSeen.UTC(), LastSeen: f.LastSeen.UTC(), Summary: f.Summary, Evidence: f.Evidence,
		TraceID: f.TraceID, Decision: f.Decision, Action: f.Action, Reason: f.Reason,
	}
	if out.State == "" {
		out.State = console.StateOpen
	}
	if a.opts.TraceURL != "" && f.TraceID != "" {
		out.Links.Trace = strings.ReplaceAll(a.opts.TraceURL, "{trace_id}", escape(f.TraceID))
	}
	if a.opts.LogsURL != "" {
		out.Links.Logs = strings.ReplaceAll(a.opts.LogsURL, "{fault_id}", escape(f.ID))
	}
	if v.Ack != nil {
		out.Ack = &consoleclient.Ack{By: v.Ack.By, Remote: v.Ack.Remote, Reason: v.Ack.Reason, Time: v.Ack.Time}
	}
	return out
}

// escape percent-encodes everything but RFC 3986's unreserved characters,
// so a value is safe in a path segment and in a query.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
