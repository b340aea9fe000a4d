// Package podlabels keeps the Kubernetes labels of the pods on one node, so
// that each GPU's series can carry its pod's labels as dcgm-exporter's
// --kubernetes-enable-pod-labels does: label keys sanitized the way
// dcgm-exporter does (every character outside [a-zA-Z0-9_] becomes _, no
// prefix: app.kubernetes.io/name becomes app_kubernetes_io_name), values as
// they are.
//
// The pods are watched (an informer: one list, then a watch) with the field
// selector spec.nodeName=<node>, so the agent holds its own node's pods only,
// stripped to namespace, name and labels. Label keys and values are written
// by whoever may create pods: they are bounded (MaxLabelsPerPod, MaxKeyLen,
// MaxValueLen) and what is over a bound is left out, never cut.
package podlabels // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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
	// Resync is the informer's resync period; 0 for none.
	Resync time.Duration
}

// Watcher holds the labels of the pods of one node.
type Watcher struct {
	logger    *zap.Logger
	allow     []*regexp.Regexp
	factory   informers.SharedInformerFactory
	informer  cache.SharedIndexInformer
	stop      chan struct{}
	startOnce sync.Once
	stopOnce  sync.Once

	mu        sync.Mutex
	failing   bool
	truncated map[string]bool // pods logged for having too many labels
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
func New(client kubernetes.Interface, s Settings, logger *zap.Logger) (*Watcher, error) {
	if s.Node == "" {
		return nil, errors.New("podlabels: the node name is empty")
	}
	allow, err := CompileAllowlist(s.Allowlist)
	if err != nil {
		return nil, fmt.Errorf("podlabels: allowlist: %w", err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	selector := "spec.nodeName=" + s.Node
	factory := informers.NewSharedInformerFactoryWithOptions(client, s.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	informer := factory.Core().V1().Pods().Informer()
	w := &Watcher{logger: logger, allow: allow, factory: factory, informer: informer,
		stop: make(chan struct{}), truncated: map[string]bool{}}
	// Keep namespace, name and the labels that may be used: not the specs,
	// statuses and managed fields of every pod on the node.
	if err := informer.SetTransform(w.strip); err != nil {
		return nil, fmt.Errorf("podlabels: %w", err)
	}
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.report(err) }); err != nil {
		return nil, fmt.Errorf("podlabels: %w", err)
	}
	// An event after failures: the watch works again.
	recovered := func(any) { w.recovered() }
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    recovered,
		UpdateFunc: func(_, o any) { recovered(o) },
		DeleteFunc: recovered,
	}); err != nil {
		return nil, fmt.Errorf("podlabels: %w", err)
	}
	return w, nil
}

// Start starts watching; it returns at once.
func (w *Watcher) Start() {
	w.startOnce.Do(func() { w.factory.Start(w.stop) })
}

// Stop stops watching and waits for the informer's goroutines.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.factory.Shutdown()
	})
}

// HasSynced reports whether the first list has been read.
func (w *Watcher) HasSynced() bool { return w.informer.HasSynced() }

// Labels returns the labels of pod namespace/name, sorted by Name; nil when
// the pod is not known (yet).
func (w *Watcher) Labels(namespace, name string) []Label {
	obj, ok, err := w.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	// While the watch fails the last labels read are served: the informer
	// catches up when it reconnects, and labels rarely change.
	return Sanitize(pod.Labels)
}

// strip is the informer's transform: a pod reduced to what Labels needs.
func (w *Watcher) strip(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: the informer handles it
	}
	labels := map[string]string{}
	keys := make([]string, 0, len(pod.Labels))
	for k, v := range pod.Labels {
		if len(k) > MaxKeyLen || len(v) > MaxValueLen || !w.allowed(k) {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > MaxLabelsPerPod {
		w.logTruncated(pod.Namespace+"/"+pod.Name, len(keys))
		keys = keys[:MaxLabelsPerPod]
	}
	for _, k := range keys {
		labels[k] = pod.Labels[k]
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		Labels:          labels,
	}}, nil
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
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.truncated[pod] || len(w.truncated) > 1024 {
		return
	}
	w.truncated[pod] = true
	w.logger.Warn("pod has more labels than are put on its GPUs' series; the first by key are kept",
		zap.String("pod", pod), zap.Int("labels", n), zap.Int("kept", MaxLabelsPerPod))
}

// report logs a failing watch once, until the informer has synced again.
func (w *Watcher) report(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing {
		w.logger.Debug("pod labels: watching pods still failing", zap.Error(err))
		return
	}
	w.failing = true
	w.logger.Warn("pod labels: cannot watch this node's pods (RBAC: get, list, watch pods); series go out with the labels last read, or none",
		zap.Error(err))
}

func (w *Watcher) recovered() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing {
		w.failing = false
		w.logger.Info("pod labels: watching this node's pods again")
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
