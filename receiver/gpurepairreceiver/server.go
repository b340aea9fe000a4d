package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

// api serves the repair API: every request is verified (signature,
// timestamp, replay, node) before anything else is read of it.
type api struct {
	node     string
	procRoot string
	verifier *repair.Verifier
	busy     *busyChecker
	jobs     *jobs
	actions  *actions
	confirm  *confirmer
	now      func() time.Time
	logger   *zap.Logger
	tb       *metadata.TelemetryBuilder

	// inFlight bounds the requests read at once (MaxInFlight): a body is
	// read (up to 64 KiB) before its signature can be checked, so without a
	// bound many unsigned senders at once would cost the agent their bodies.
	inFlight chan struct{}

	mu     sync.Mutex
	logged map[string]bool // refusal reasons logged once
}

// MaxInFlight is how many requests the agent reads at once; more are
// refused with 503 before their body is read. The gateway asks one node a
// few things at a time, so 16 is room and bounds memory at 16 × 64 KiB.
const MaxInFlight = 16

// refusal is an answer other than 2xx.
type refusal struct {
	status int
	reason string // a metadata.Reason*
	msg    string
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case a.inFlight <- struct{}{}:
		defer func() { <-a.inFlight }()
	default:
		a.refuse(w, r, &refusal{http.StatusServiceUnavailable, metadata.ReasonOverloaded, fmt.Sprintf("more than %d requests at once", MaxInFlight)})
		return
	}
	if f := a.serve(w, r); f != nil {
		a.refuse(w, r, f)
	}
}

func (a *api) serve(w http.ResponseWriter, r *http.Request) *refusal {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, repair.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &refusal{http.StatusRequestEntityTooLarge, metadata.ReasonTooLarge, fmt.Sprintf("body over %d bytes", repair.MaxRequestBytes)}
		}
		return &refusal{http.StatusBadRequest, metadata.ReasonBadBody, "reading the body: " + err.Error()}
	}
	signed, err := a.verifier.Verify(r.Method, r.URL.RequestURI(), r.Header, body, a.now())
	if err != nil {
		return verifyRefusal(err)
	}
	if signed.Node != a.node {
		return &refusal{http.StatusForbidden, metadata.ReasonWrongNode, fmt.Sprintf("request for node %q; this is %q", signed.Node, a.node)}
	}
	switch {
	case r.URL.Path == repair.PathNode && r.Method == http.MethodGet:
		return a.nodeStatus(w, r.Context())
	case r.URL.Path == repair.PathGPUReset && r.Method == http.MethodPost:
		return a.startReset(w, body)
	case r.URL.Path == repair.PathVerify && r.Method == http.MethodPost:
		return a.startVerify(w, body)
	case r.URL.Path == repair.PathConfirm && r.Method == http.MethodPost:
		return a.confirmFault(w, r.Context(), body)
	case strings.HasPrefix(r.URL.Path, repair.PathJobs) && r.Method == http.MethodGet:
		id := strings.TrimPrefix(r.URL.Path, repair.PathJobs)
		j, ok := a.jobs.get(id)
		if !ok {
			return &refusal{http.StatusNotFound, metadata.ReasonNotFound, fmt.Sprintf("no job %q", id)}
		}
		writeJSON(w, http.StatusOK, j)
		return nil
	case r.URL.Path == repair.PathNode || r.URL.Path == repair.PathGPUReset || r.URL.Path == repair.PathVerify || r.URL.Path == repair.PathConfirm || strings.HasPrefix(r.URL.Path, repair.PathJobs):
		return &refusal{http.StatusMethodNotAllowed, metadata.ReasonNotFound, "method " + r.Method + " not allowed"}
	}
	return &refusal{http.StatusNotFound, metadata.ReasonNotFound, "no such path"}
}

// verifyRefusal maps the verifier's errors to answers.
func verifyRefusal(err error) *refusal {
	switch {
	case errors.Is(err, repair.ErrMalformed):
		return &refusal{http.StatusUnauthorized, metadata.ReasonMalformed, err.Error()}
	case errors.Is(err, repair.ErrSignature):
		return &refusal{http.StatusUnauthorized, metadata.ReasonBadSignature, "signature does not verify"}
	case errors.Is(err, repair.ErrStale):
		return &refusal{http.StatusUnauthorized, metadata.ReasonStale, err.Error()}
	case errors.Is(err, repair.ErrReplay):
		return &refusal{http.StatusUnauthorized, metadata.ReasonReplay, err.Error()}
	case errors.Is(err, repair.ErrReplayFull):
		return &refusal{http.StatusServiceUnavailable, metadata.ReasonReplayFull, err.Error()}
	}
	return &refusal{http.StatusUnauthorized, metadata.ReasonMalformed, err.Error()}
}

// refuse answers f, counts it and logs the first refusal of each reason.
func (a *api) refuse(w http.ResponseWriter, r *http.Request, f *refusal) {
	a.tb.GpuRepairRequestsRefused.Add(r.Context(), 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, f.reason))))
	a.mu.Lock()
	first := !a.logged[f.reason]
	a.logged[f.reason] = true
	a.mu.Unlock()
	if first {
		a.logger.Warn("gpurepair: request refused (logged once per reason; otelcol_gpu_repair_requests_refused counts them all)",
			zap.String("reason", f.reason), zap.Int("status", f.status), zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr), zap.String("why", f.msg))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.msg+"\n")
}

func (a *api) nodeStatus(w http.ResponseWriter, ctx context.Context) *refusal {
	bootID, err := readBootID(a.procRoot)
	if err != nil {
		return &refusal{http.StatusServiceUnavailable, metadata.ReasonUnavailable, err.Error()}
	}
	st, err := a.busy.nodeStatus(ctx, a.node, bootID)
	if err != nil {
		return &refusal{http.StatusServiceUnavailable, metadata.ReasonUnavailable, err.Error()}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// decode reads a request body strictly and checks its id and node.
func (a *api) decode(body []byte, v any, id, node *string) *refusal {
	if err := repair.DecodeStrict(body, v); err != nil {
		if errors.Is(err, repair.ErrRepeatedKey) {
			return &refusal{http.StatusBadRequest, metadata.ReasonRepeatedKey, err.Error()}
		}
		return &refusal{http.StatusBadRequest, metadata.ReasonBadBody, err.Error()}
	}
	if !repair.ValidID(*id) {
		return &refusal{http.StatusBadRequest, metadata.ReasonBadBody, fmt.Sprintf("id %q is not 1 to %d of [A-Za-z0-9-_.:]", *id, repair.MaxIDLen)}
	}
	if *node != a.node {
		return &refusal{http.StatusForbidden, metadata.ReasonWrongNode, fmt.Sprintf("body names node %q; this is %q", *node, a.node)}
	}
	return nil
}

func (a *api) startReset(w http.ResponseWriter, body []byte) *refusal {
	var req repair.GPUResetRequest
	if f := a.decode(body, &req, &req.ID, &req.Node); f != nil {
		return f
	}
	if req.GPUUUID == "" {
		return &refusal{http.StatusBadRequest, metadata.ReasonBadBody, "gpu_uuid is empty"}
	}
	j, created, err := a.jobs.start(req.ID, a.node, req.FaultID, kindGPUReset, requestKey(req), []string{req.GPUUUID}, a.actions.gpuReset(req.GPUUUID))
	return a.answerJob(w, j, created, err)
}

func (a *api) startVerify(w http.ResponseWriter, body []byte) *refusal {
	var req repair.VerifyRequest
	if f := a.decode(body, &req, &req.ID, &req.Node); f != nil {
		return f
	}
	if f := checkVerifyRequest(req); f != nil {
		return f
	}
	j, created, err := a.jobs.start(req.ID, a.node, req.FaultID, kindVerify, requestKey(req), req.GPUs, a.actions.verify(req))
	return a.answerJob(w, j, created, err)
}

// maxVerifyGPUs bounds a verification's GPU list (far above a node's).
const maxVerifyGPUs = 64

// maxLinksWindow bounds links_steady's window.
const maxLinksWindow = time.Hour

func checkVerifyRequest(req repair.VerifyRequest) *refusal {
	bad := func(format string, args ...any) *refusal {
		return &refusal{http.StatusBadRequest, metadata.ReasonBadBody, fmt.Sprintf(format, args...)}
	}
	if len(req.Checks) == 0 {
		return bad("checks is empty: a verification with no check proves nothing")
	}
	if len(req.GPUs) > maxVerifyGPUs {
		return bad("gpus lists %d GPUs, more than %d", len(req.GPUs), maxVerifyGPUs)
	}
	seen := map[string]bool{}
	for i, g := range req.GPUs {
		if g == "" || seen[g] {
			return bad("gpus[%d] %q is empty or repeated", i, g)
		}
		seen[g] = true
	}
	for i, c := range req.Checks {
		switch c.Check {
		case repair.CheckDiag:
			if c.Level < 1 || c.Level > 3 {
				return bad("checks[%d]: %s level %d is not 1, 2 or 3", i, c.Check, c.Level)
			}
		case repair.CheckLinksSteady:
			if c.Window <= 0 || c.Window > maxLinksWindow {
				return bad("checks[%d]: %s window %s is not in (0, %s]", i, c.Check, c.Window, maxLinksWindow)
			}
		default:
			return bad("checks[%d]: unknown check %q", i, c.Check)
		}
	}
	return nil
}

func (a *api) answerJob(w http.ResponseWriter, j repair.Job, created bool, err error) *refusal {
	switch {
	case errors.Is(err, errConflict):
		return &refusal{http.StatusConflict, metadata.ReasonConflict, err.Error()}
	case errors.Is(err, errTooManyJobs):
		return &refusal{http.StatusServiceUnavailable, metadata.ReasonTooManyJobs, err.Error()}
	case err != nil:
		return &refusal{http.StatusServiceUnavailable, metadata.ReasonUnavailable, err.Error()}
	}
	status := http.StatusOK // a retry: the existing job
	if created {
		status = http.StatusAccepted
	}
	writeJSON(w, status, j)
	return nil
}

// requestKey is the request's content, to tell a retry (same id, same
// request) from a conflict (same id, another request).
func requestKey(req any) string {
	b, _ := json.Marshal(req)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// readBootID reads <procRoot>/sys/kernel/random/boot_id. Unreadable or
// empty is an error: the node status is refused rather than answered with
// a boot id the gateway would take for a reboot.
func readBootID(procRoot string) (string, error) {
	p := filepath.Join(procRoot, "sys", "kernel", "random", "boot_id")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading the boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" || len(id) > 128 {
		return "", fmt.Errorf("boot id in %s is empty or over 128 bytes", p)
	}
	return id, nil
}
