package podlabels // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// The pods' metadata only (client-go's metadata informer asks the same):
// no spec, no status, about a tenth of the bytes of a pod. An API server
// that does not know it sends whole pods; only the metadata is decoded.
const (
	acceptList  = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	acceptWatch = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	pageSize    = 500
	pageTimeout = 2 * time.Minute
	podsPath    = "/api/v1/pods"
)

// run lists the node's pods, then watches them from the list's resource
// version, as client-go's reflector does: a watch that ends (its
// timeoutSeconds, or the server's choice) is started again from the last
// version seen; 410 Gone (the version was compacted away) lists again;
// other errors are logged once and retried with a jittered exponential
// backoff.
func (w *Watcher) run() {
	defer w.wg.Done()
	ctx := w.ctx
	// The first list from the API server's cache (resourceVersion=0, as
	// client-go: cheap for the server); a list after 410 from no older
	// than what was seen; after a list's own 410, the latest.
	listFrom, rv, listed := "0", "", false
	for ctx.Err() == nil {
		if !listed {
			v, err := w.list(ctx, listFrom)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if isGone(err) {
					listFrom = ""
				}
				w.report(fmt.Errorf("list: %w", err))
				if !w.backoff.wait(ctx) {
					return
				}
				continue
			}
			rv, listed = v, true
			w.synced.Store(true)
			w.recovered()
			w.backoff.reset()
		}
		start := time.Now()
		events, err := w.watch(ctx, &rv)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && events == 0 && time.Since(start) < time.Second:
			// Ended at once, empty (a proxy that cuts watches, a server
			// shutting down): not a failure, but not a loop either.
			w.logger.Debug("pod labels: the watch ended at once, with no event")
			if !w.backoff.wait(ctx) {
				return
			}
		case isGone(err):
			w.logger.Debug("pod labels: the watch's resource version is gone; listing again", zap.Error(err))
			listFrom, listed = rv, false
			if events == 0 && !w.backoff.wait(ctx) { // not straight after a list
				return
			}
		case err != nil:
			w.report(fmt.Errorf("watch: %w", err))
			if !w.backoff.wait(ctx) {
				return
			}
		case events > 0:
			w.backoff.reset()
		}
	}
}

func (w *Watcher) query() url.Values {
	return url.Values{"fieldSelector": {"spec.nodeName=" + w.node}}
}

// list reads the node's pods, page by page, and replaces those held; it
// returns the list's resource version.
func (w *Watcher) list(ctx context.Context, from string) (string, error) {
	w.mu.RLock()
	pods := make(map[podKey][]Label, len(w.pods))
	w.mu.RUnlock()
	q := w.query()
	q.Set("limit", strconv.Itoa(pageSize))
	if from != "" {
		q.Set("resourceVersion", from)
		if from != "0" {
			q.Set("resourceVersionMatch", "NotOlderThan")
		}
	}
	rv := ""
	for page := 0; ; page++ {
		if page > MaxPods {
			return "", fmt.Errorf("more than %d pages", MaxPods)
		}
		meta, err := w.listPage(ctx, q, pods)
		if err != nil {
			return "", err
		}
		if page == 0 {
			rv = meta.ResourceVersion
		}
		if meta.Continue == "" {
			break
		}
		// As client-go's pager: the version is the first page's.
		q.Del("resourceVersion")
		q.Del("resourceVersionMatch")
		q.Set("continue", meta.Continue)
	}
	if rv == "" {
		return "", errors.New("the list has no resourceVersion")
	}
	w.mu.Lock()
	w.pods = pods
	w.mu.Unlock()
	return rv, nil
}

func (w *Watcher) listPage(ctx context.Context, q url.Values, pods map[podKey][]Label) (listMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	resp, err := w.client.get(ctx, podsPath, q, acceptList)
	if err != nil {
		return listMeta{}, err
	}
	defer resp.Body.Close()
	return readList(newValueReader(resp.Body, w.maxObject), func(raw []byte) error {
		if raw == nil {
			w.refuse("list")
			return nil
		}
		var o object
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("a listed pod: %w", err)
		}
		if m := &o.Metadata; m.Name != "" {
			labels := w.strip(m)
			w.putIn(pods, m, labels)
		}
		return nil
	})
}

// putIn sets a pod's labels in pods, unless MaxPods others are there.
func (w *Watcher) putIn(pods map[podKey][]Label, m *objectMeta, labels []Label) {
	k := podKey{m.Namespace, m.Name}
	if _, ok := pods[k]; !ok && len(pods) >= MaxPods {
		w.logTooManyPods()
		return
	}
	pods[k] = labels
}

// watch follows the pods from *rv, which it moves on with each event; it
// returns the number of events read and why it ended (nil: the stream
// ended).
func (w *Watcher) watch(ctx context.Context, rv *string) (int, error) {
	timeout := w.minWatch + rand.N(w.minWatch+1)
	q := w.query()
	q.Set("watch", "true")
	q.Set("resourceVersion", *rv)
	q.Set("allowWatchBookmarks", "true")
	q.Set("timeoutSeconds", strconv.Itoa(int(timeout.Seconds())))
	// A server that does not end the watch at timeoutSeconds is left a
	// minute more.
	wctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	resp, err := w.client.get(wctx, podsPath, q, acceptWatch)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	v := newValueReader(resp.Body, w.maxObject)
	events := 0
	for {
		raw, over, err := v.next()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return events, nil // our bound on the watch
			}
			return events, err
		}
		if over {
			w.refuse("watch")
			continue
		}
		var ev watchEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return events, fmt.Errorf("a watch event: %w", err)
		}
		m := &ev.Object.Metadata
		switch ev.Type {
		case "ADDED", "MODIFIED":
			if m.Name != "" {
				labels := w.strip(m)
				w.mu.Lock()
				w.putIn(w.pods, m, labels)
				w.mu.Unlock()
			}
		case "DELETED":
			w.mu.Lock()
			delete(w.pods, podKey{m.Namespace, m.Name})
			w.mu.Unlock()
		case "BOOKMARK":
		case "ERROR":
			code := ev.Object.Code
			if code == 0 {
				code = http.StatusInternalServerError
			}
			return events, &StatusError{Code: code, Reason: ev.Object.Reason, Message: ev.Object.Message}
		default:
			return events, fmt.Errorf("a watch event of type %q", ev.Type)
		}
		if m.ResourceVersion != "" {
			*rv = m.ResourceVersion
		}
		events++
		if events == 1 {
			w.recovered()
		}
	}
}

// backoff is a jittered exponential backoff: each wait is between half
// and one and a half times the current step, which doubles up to max.
type backoff struct {
	initial, max time.Duration
	cur          time.Duration
}

func (b *backoff) reset() { b.cur = 0 }

// next is the next wait.
func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.initial
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	if b.cur <= 0 {
		return 0
	}
	return b.cur/2 + rand.N(b.cur)
}

// wait waits for the next step; false when ctx ends first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
