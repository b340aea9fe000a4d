// Package podlabels keeps the Kubernetes labels of the pods on one node, so
// that each GPU's series can carry its pod's labels as dcgm-exporter's
// --kubernetes-enable-pod-labels does: label keys sanitized the way
// dcgm-exporter does (every character outside [a-zA-Z0-9_] becomes _, no
// prefix: app.kubernetes.io/name becomes app_kubernetes_io_name), values as
// they are.
//
// The pods are listed, then watched, with the field selector
// spec.nodeName=<node>, so the agent holds its own node's pods only,
// stripped to namespace, name and labels. It is client-go's informer
// reduced to what the labels need, over net/http (client.go, watch.go):
// the API server is asked for the pods' metadata only, and each object
// read is bounded (MaxObjectBytes). Label keys and values are written by
// whoever may create pods: they are bounded (MaxLabelsPerPod, MaxKeyLen,
// MaxValueLen) and what is over a bound is left out, never cut.
package podlabels // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Bounds on what one pod contributes to every series of its GPUs.
const (
	// MaxLabelsPerPod: the labels kept per pod, the first by key after the
	// allowlist; a pod with more is logged once.
	MaxLabelsPerPod = 32
	// MaxKeyLen: a longer key (Kubernetes allows 253 + 1 + 63) is left out.
	MaxKeyLen = 128
	// MaxValueLen: Kubernetes' own bound on a label value; a longer value
	// (an API server that does not validate) is left out.
	MaxValueLen = 63
)

// Bounds on what the API server's answers may take.
const (
	// MaxObjectBytes: a list item or watch event over this many bytes of
	// JSON is refused (logged, counted) and the stream goes on. The pods'
	// metadata only is asked for: Kubernetes bounds a pod's annotations to
	// 256 KiB and a whole object to about 1.5 MiB (etcd's request limit).
	MaxObjectBytes = 1 << 20
	// MaxPods: the pods held; a kubelet runs 110 by default. Over this (an
	// API server that does not apply the field selector) the pods not yet
	// held are left out, logged once.
	MaxPods = 1024
)

// Label is one sanitized pod label.
type Label struct {
	// Name is the key as dcgm-exporter writes it (app_kubernetes_io_name).
	Name string
	// Key is the label's Kubernetes key (app.kubernetes.io/name).
	Key   string
	Value string
}

// Settings configure a Watcher.
type Settings struct {
	// Node is the node whose pods are watched (spec.nodeName).
	Node string
	// Allowlist, when not empty, keeps only the labels whose Kubernetes key
	// matches one of these regular expressions (dcgm-exporter's
	// --kubernetes-pod-label-allowlist-regex).
	Allowlist []string
}

type podKey struct{ namespace, name string }

// Watcher holds the labels of the pods of one node.
type Watcher struct {
	logger    *zap.Logger
	client    *Client
	node      string
	allow     []*regexp.Regexp
	maxObject int
	backoff   backoff
	// minWatch: each watch asks the server to end it after minWatch to
	// 2*minWatch (client-go's reflector: 5 to 10 minutes).
	minWatch time.Duration

	ctx       context.Context
	cancel    context.CancelFunc
	lifeMu    sync.Mutex // Start against Stop
	wg        sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
	synced    atomic.Bool
	refused   atomic.Int64

	mu   sync.RWMutex
	pods map[podKey][]Label // sanitized; shared with Labels' callers, never changed

	logMu       sync.Mutex
	failing     bool
	truncated   map[string]bool // pods logged for having too many labels
	refusedOnce bool
	tooManyPods bool
}

// CompileAllowlist checks the allowlist's regular expressions; errors name
// the entry.
func CompileAllowlist(exprs []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(exprs))
	var errs []error
	for i, e := range exprs {
		re, err := regexp.Compile(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("[%d] %q: %w", i, e, err))
			continue
		}
		out = append(out, re)
	}
	return out, errors.Join(errs...)
}

// New returns a Watcher of s.Node's pods through client; Start starts it.
func New(client *Client, s Settings, logger *zap.Logger) (*Watcher, error) {
	if s.Node == "" {
		return nil, errors.New("podlabels: the node name is empty")
	}
	if client == nil {
		return nil, errors.New("podlabels: no API client")
	}
	allow, err := CompileAllowlist(s.Allowlist)
	if err != nil {
		return nil, fmt.Errorf("podlabels: allowlist: %w", err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Watcher{
		logger: logger, client: client, node: s.Node, allow: allow,
		maxObject: MaxObjectBytes,
		backoff:   backoff{initial: 800 * time.Millisecond, max: 30 * time.Second},
		minWatch:  5 * time.Minute,
		ctx:       ctx, cancel: cancel,
		pods: map[podKey][]Label{}, truncated: map[string]bool{},
	}, nil
}

// Start starts watching; it returns at once. After Stop it does nothing.
func (w *Watcher) Start() {
	w.startOnce.Do(func() {
		w.lifeMu.Lock()
		defer w.lifeMu.Unlock()
		if w.ctx.Err() != nil {
			return
		}
		w.wg.Add(1)
		go w.run()
	})
}

// Stop stops watching: the request in flight is cancelled and Stop waits
// for the Watcher's goroutine.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() {
		w.lifeMu.Lock()
		w.cancel()
		w.lifeMu.Unlock()
		w.wg.Wait()
		w.client.CloseIdleConnections()
	})
}

// HasSynced reports whether the first list has been read.
func (w *Watcher) HasSynced() bool { return w.synced.Load() }

// Refused is the number of objects refused for being over MaxObjectBytes.
func (w *Watcher) Refused() int64 { return w.refused.Load() }

// Labels returns the labels of pod namespace/name, sorted by Name; nil when
// the pod is not known (yet). The slice is shared: callers must not change
// it.
func (w *Watcher) Labels(namespace, name string) []Label {
	// While the watch fails the last labels read are served: the watcher
	// catches up when it reconnects, and labels rarely change.
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.pods[podKey{namespace, name}]
}

// strip reduces a pod's labels to the bounded, allowed ones, sanitized.
func (w *Watcher) strip(m *objectMeta) []Label {
	keys := make([]string, 0, len(m.Labels))
	for k, v := range m.Labels {
		if len(k) > MaxKeyLen || len(v) > MaxValueLen || !w.allowed(k) {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > MaxLabelsPerPod {
		w.logTruncated(m.Namespace+"/"+m.Name, len(keys))
		keys = keys[:MaxLabelsPerPod]
	}
	labels := make(map[string]string, len(keys))
	for _, k := range keys {
		labels[k] = m.Labels[k]
	}
	return Sanitize(labels)
}

func (w *Watcher) allowed(key string) bool {
	if len(w.allow) == 0 {
		return true
	}
	for _, re := range w.allow {
		if re.MatchString(key) {
			return true
		}
	}
	return false
}

func (w *Watcher) logTruncated(pod string, n int) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	if w.truncated[pod] || len(w.truncated) > 1024 {
		return
	}
	w.truncated[pod] = true
	w.logger.Warn("pod has more labels than are put on its GPUs' series; the first by key are kept",
		zap.String("pod", pod), zap.Int("labels", n), zap.Int("kept", MaxLabelsPerPod))
}

// report logs a failing list or watch once, until it works again.
func (w *Watcher) report(err error) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	if w.failing {
		w.logger.Debug("pod labels: watching pods still failing", zap.Error(err))
		return
	}
	w.failing = true
	w.logger.Warn("pod labels: cannot watch this node's pods (RBAC: get, list, watch pods); series go out with the labels last read, or none",
		zap.Error(err))
}

func (w *Watcher) recovered() {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	if w.failing {
		w.failing = false
		w.logger.Info("pod labels: watching this node's pods again")
	}
}

// refuse counts an object over MaxObjectBytes; the first is a warning.
func (w *Watcher) refuse(what string) {
	n := w.refused.Add(1)
	w.logMu.Lock()
	defer w.logMu.Unlock()
	log := w.logger.Debug
	if !w.refusedOnce {
		w.refusedOnce = true
		log = w.logger.Warn
	}
	log("pod labels: refused an object over the size bound; that pod's labels are not updated",
		zap.String("in", what), zap.Int("max_bytes", w.maxObject), zap.Int64("refused", n))
}

func (w *Watcher) logTooManyPods() {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	if !w.tooManyPods {
		w.tooManyPods = true
		w.logger.Warn("pod labels: the API server lists more pods for this node than are held; the others have no labels",
			zap.Int("max_pods", MaxPods))
	}
}

// Sanitize turns pod labels into dcgm-exporter's label names, sorted by
// name. Of two keys that sanitize to the same name the first by key is kept;
// a name that starts with a digit or with __ (not a Prometheus label name,
// or a reserved one) is left out.
func Sanitize(labels map[string]string) []Label {
	if len(labels) == 0 {
		return nil
	}
	out := make([]Label, 0, len(labels))
	for k, v := range labels {
		name := SanitizeName(k)
		if name == "" || (name[0] >= '0' && name[0] <= '9') || strings.HasPrefix(name, "__") {
			continue
		}
		out = append(out, Label{Name: name, Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b Label) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return slices.CompactFunc(out, func(a, b Label) bool { return a.Name == b.Name })
}

// SanitizeName is dcgm-exporter's utils.SanitizeLabelName: each character
// (rune) outside [a-zA-Z0-9_] becomes one _.
func SanitizeName(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
