package podlabels

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels/fakeapi"
)

func seen(w *Watcher, ns, name string) func() bool {
	return func() bool { return w.Labels(ns, name) != nil }
}

func lastRequest(t *testing.T, srv *fakeapi.Server, watch bool) fakeapi.Request {
	t.Helper()
	reqs := srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Watch == watch {
			return reqs[i]
		}
	}
	t.Fatalf("no request with watch %v", watch)
	return fakeapi.Request{}
}

// The list asks for the node's pods' metadata, in pages of 500 from the
// API server's cache; the watch starts from the list's version, with
// bookmarks and a timeout of 5 to 10 minutes.
func TestListPagesThenWatch(t *testing.T) {
	srv := fakeServer(t)
	srv.PageSize = 2
	for i := range 5 {
		srv.Put(pod("gpu-1", "training", "p"+strconv.Itoa(i), map[string]string{"i": strconv.Itoa(i)}))
	}
	srv.Put(pod("gpu-2", "training", "elsewhere", map[string]string{"i": "x"}))
	listRV := srv.ResourceVersion()
	w := watch(t, client(t, srv, Config{UserAgent: "test agent"}), Settings{Node: "gpu-1"}, nil)
	for i := range 5 {
		assert.Equal(t, []Label{{Name: "i", Key: "i", Value: strconv.Itoa(i)}}, w.Labels("training", "p"+strconv.Itoa(i)))
	}
	assert.Nil(t, w.Labels("training", "elsewhere"))

	require.Eventually(t, func() bool { return srv.Count(true) > 0 }, 30*time.Second, 10*time.Millisecond)
	reqs := srv.Requests()
	require.Len(t, reqs, 4, "three pages, then the watch")
	first := reqs[0].Query
	assert.Equal(t, "spec.nodeName=gpu-1", first.Get("fieldSelector"))
	assert.Equal(t, "500", first.Get("limit"))
	assert.Equal(t, "0", first.Get("resourceVersion"), "the first list from the cache")
	assert.Empty(t, first.Get("continue"))
	assert.Contains(t, reqs[0].Accept, "as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	for _, r := range reqs[1:3] {
		assert.NotEmpty(t, r.Query.Get("continue"))
		assert.Empty(t, r.Query.Get("resourceVersion"), "a continued list names no version")
		assert.Equal(t, "spec.nodeName=gpu-1", r.Query.Get("fieldSelector"))
	}
	wq := reqs[3].Query
	assert.True(t, reqs[3].Watch)
	assert.Equal(t, listRV, wq.Get("resourceVersion"))
	assert.Equal(t, "true", wq.Get("allowWatchBookmarks"))
	assert.Equal(t, "spec.nodeName=gpu-1", wq.Get("fieldSelector"))
	timeout, err := strconv.Atoi(wq.Get("timeoutSeconds"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, timeout, 300)
	assert.LessOrEqual(t, timeout, 600)
	assert.Contains(t, reqs[3].Accept, "as=PartialObjectMetadata;g=meta.k8s.io;v=v1")

	// A bookmark moves the version the next watch starts from.
	srv.Put(pod("gpu-2", "training", "elsewhere-2", nil)) // not this node's: no event
	srv.Bookmark()
	bookmark := srv.ResourceVersion()
	assert.NotEqual(t, listRV, bookmark)
	require.Eventually(t, func() bool {
		srv.CloseWatches()
		return lastRequest(t, srv, true).Query.Get("resourceVersion") == bookmark
	}, 30*time.Second, 20*time.Millisecond)
	srv.Put(pod("gpu-1", "training", "after-bookmark", map[string]string{"a": "b"}))
	require.Eventually(t, seen(w, "training", "after-bookmark"), 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, 3, srv.Count(false), "listed once: three pages")
	for _, r := range srv.Requests() {
		assert.Equal(t, "", r.Authorization, "no token configured, none sent")
	}
}

// The server ends the watch (its timeout, a restart): the next one starts
// from the last version seen, with no list.
func TestWatchReconnectsAfterServerClosesStream(t *testing.T) {
	srv := fakeServer(t, pod("gpu-1", "training", "a", map[string]string{"x": "1"}))
	core, logs := observer.New(zap.InfoLevel)
	w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, zap.New(core))
	srv.Put(pod("gpu-1", "training", "b", map[string]string{"x": "2"}))
	require.Eventually(t, seen(w, "training", "b"), 30*time.Second, 10*time.Millisecond)
	afterB := srv.ResourceVersion()

	for range 3 {
		srv.CloseWatches()
		srv.Put(pod("gpu-1", "training", "b", map[string]string{"x": "2"})) // keeps the stream busy
	}
	srv.Put(pod("gpu-1", "training", "c", map[string]string{"x": "3"}))
	require.Eventually(t, seen(w, "training", "c"), 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, srv.Count(false), "no list again")
	require.GreaterOrEqual(t, srv.Count(true), 2)
	for i, r := range srv.Requests() {
		if r.Watch && i > 1 {
			n, err := strconv.Atoi(r.Query.Get("resourceVersion"))
			require.NoError(t, err)
			min, _ := strconv.Atoi(afterB)
			assert.GreaterOrEqual(t, n, min, "a reconnect starts from the last version seen")
		}
	}
	assert.Equal(t, []Label{{Name: "x", Key: "x", Value: "1"}}, w.Labels("training", "a"))
	assert.Zero(t, logs.FilterMessageSnippet("cannot watch").Len(), "a watch the server ends is no failure")
}

// 410 Gone on a watch (its version compacted away): the pods are listed
// again, from no older than the version held, and what changed meanwhile
// (a pod added, one deleted, one relabelled) is seen.
func TestRelistOn410Gone(t *testing.T) {
	for _, asStatus := range []bool{false, true} {
		t.Run("status="+strconv.FormatBool(asStatus), func(t *testing.T) {
			srv := fakeServer(t,
				pod("gpu-1", "training", "kept", map[string]string{"v": "1"}),
				pod("gpu-1", "training", "gone", map[string]string{"v": "1"}))
			srv.GoneAsStatus = asStatus
			w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, nil)
			require.Eventually(t, func() bool { return srv.Count(true) == 1 }, 30*time.Second, 10*time.Millisecond)
			held := lastRequest(t, srv, true).Query.Get("resourceVersion")

			srv.Compact([]fakeapi.Pod{
				pod("gpu-1", "training", "new", map[string]string{"v": "2"}),
				pod("gpu-1", "training", "kept", map[string]string{"v": "2"}),
			}, []string{"training/gone"})
			srv.CloseWatches()
			require.Eventually(t, seen(w, "training", "new"), 30*time.Second, 10*time.Millisecond)
			assert.Nil(t, w.Labels("training", "gone"), "a pod deleted while the watch was away")
			assert.Equal(t, []Label{{Name: "v", Key: "v", Value: "2"}}, w.Labels("training", "kept"))

			assert.Equal(t, 2, srv.Count(false), "listed again")
			relist := lastRequest(t, srv, false).Query
			assert.Equal(t, held, relist.Get("resourceVersion"))
			assert.Equal(t, "NotOlderThan", relist.Get("resourceVersionMatch"))

			// And watched again from the new list.
			srv.Put(pod("gpu-1", "training", "later", map[string]string{"v": "3"}))
			require.Eventually(t, seen(w, "training", "later"), 30*time.Second, 10*time.Millisecond)
		})
	}
}

// A list of which even the version is gone: listed again from the
// latest.
func TestListGoneListsLatest(t *testing.T) {
	srv := fakeServer(t, pod("gpu-1", "training", "a", map[string]string{"v": "1"}))
	var gone atomic.Int32
	srv.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("watch") == "" && gone.Add(1) == 1 {
			fakeapi.Status(w, http.StatusGone, "Expired", "too old resource version")
			return true
		}
		return false
	}
	w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, nil)
	assert.NotNil(t, w.Labels("training", "a"))
	reqs := srv.Requests()
	require.GreaterOrEqual(t, len(reqs), 2)
	assert.Equal(t, "0", reqs[0].Query.Get("resourceVersion"))
	assert.False(t, reqs[1].Query.Has("resourceVersion"), "the latest: no version")
	assert.False(t, reqs[1].Query.Has("resourceVersionMatch"))
}

// A pod over the size bound is refused, logged and counted, in the list and
// in the watch; the stream goes on after it.
func TestOversizedObjectRefused(t *testing.T) {
	huge := map[string]string{"blob": strings.Repeat("x", 8<<10)}
	srv := fakeServer(t,
		pod("gpu-1", "training", "small-1", map[string]string{"v": "1"}),
		fakeapi.Pod{Namespace: "training", Name: "huge", Node: "gpu-1", Labels: map[string]string{"v": "1"}, Annotations: huge},
		pod("gpu-1", "training", "small-2", map[string]string{"v": "2"}))
	core, logs := observer.New(zap.InfoLevel)
	w := newWatcher(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, zap.New(core))
	w.maxObject = 4 << 10
	w.Start()
	require.Eventually(t, w.HasSynced, 30*time.Second, 10*time.Millisecond)
	assert.NotNil(t, w.Labels("training", "small-1"))
	assert.NotNil(t, w.Labels("training", "small-2"), "the list goes on after the refused pod")
	assert.Nil(t, w.Labels("training", "huge"))
	assert.Equal(t, int64(1), w.Refused())
	refused := logs.FilterMessageSnippet("refused an object")
	require.Equal(t, 1, refused.Len())
	assert.Equal(t, "list", refused.All()[0].ContextMap()["in"])

	// In the watch: a new huge pod, and small-1 grown over the bound (its
	// labels stay as they were), then a small pod, seen.
	srv.Put(fakeapi.Pod{Namespace: "training", Name: "huge-2", Node: "gpu-1", Labels: map[string]string{"v": "1"}, Annotations: huge})
	srv.Put(fakeapi.Pod{Namespace: "training", Name: "small-1", Node: "gpu-1", Labels: map[string]string{"v": "changed"}, Annotations: huge})
	srv.Put(pod("gpu-1", "training", "small-3", map[string]string{"v": "3"}))
	require.Eventually(t, seen(w, "training", "small-3"), 30*time.Second, 10*time.Millisecond)
	assert.Nil(t, w.Labels("training", "huge-2"))
	assert.Equal(t, []Label{{Name: "v", Key: "v", Value: "1"}}, w.Labels("training", "small-1"))
	assert.Equal(t, int64(3), w.Refused())
	assert.Equal(t, 1, logs.FilterMessageSnippet("refused an object").Len(), "a warning once; the count goes on")
	assert.Equal(t, 1, srv.Count(true), "the same watch")
}

// A hostile server streams one endless value: refused with a bounded
// buffer, and the watch started again.
func TestEndlessWatchValueBounded(t *testing.T) {
	srv := fakeServer(t, pod("gpu-1", "training", "a", map[string]string{"v": "1"}))
	var hostile atomic.Bool
	hostile.Store(true)
	srv.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("watch") == "" || !hostile.CompareAndSwap(true, false) {
			return false
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"type":"ADDED","object":{"metadata":{"name":"`))
		chunk := []byte(strings.Repeat("z", 64<<10))
		for range 64 { // 4 MiB, no end
			if _, err := w.Write(chunk); err != nil {
				return true
			}
		}
		return true
	}
	core, logs := observer.New(zap.InfoLevel)
	w := newWatcher(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, zap.New(core))
	w.maxObject = 16 << 10
	w.Start()
	require.Eventually(t, func() bool { return srv.Count(true) >= 2 }, 30*time.Second, 10*time.Millisecond)
	srv.Put(pod("gpu-1", "training", "b", map[string]string{"v": "2"}))
	require.Eventually(t, seen(w, "training", "b"), 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, logs.FilterMessageSnippet("cannot watch").Len(), "the cut stream is logged")
	assert.GreaterOrEqual(t, srv.Count(true), 2)
}

func writeTokenFile(t *testing.T, path, token string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path+".new", []byte(token+"\n"), 0o600))
	require.NoError(t, os.Rename(path+".new", path)) // as the kubelet: a new file
}

// The token file is read again when it changes: a reconnect sends the new
// token; a 401 (the file behind the server) is logged once, and the next
// token in the file ends it.
func TestTokenFileRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	writeTokenFile(t, file, "t1")
	srv := fakeapi.New(t, "t1")
	srv.Put(pod("gpu-1", "training", "a", map[string]string{"v": "1"}))
	core, logs := observer.New(zap.InfoLevel)
	w := watch(t, client(t, srv, Config{TokenFile: file}), Settings{Node: "gpu-1"}, zap.New(core))
	require.Eventually(t, func() bool { return srv.Count(true) == 1 }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, "Bearer t1", lastRequest(t, srv, true).Authorization)

	// Rotated: file first, then the server.
	writeTokenFile(t, file, "t2")
	srv.SetToken("t2")
	srv.CloseWatches()
	srv.Put(pod("gpu-1", "training", "b", map[string]string{"v": "2"}))
	require.Eventually(t, seen(w, "training", "b"), 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return srv.Count(true) >= 2 }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, "Bearer t2", lastRequest(t, srv, true).Authorization)
	assert.Zero(t, logs.FilterMessageSnippet("cannot watch").Len())

	// The server first: 401, logged once, until the file has the token.
	srv.SetToken("t3")
	srv.CloseWatches()
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("cannot watch").Len() == 1 }, 30*time.Second, 10*time.Millisecond)
	writeTokenFile(t, file, "t3")
	srv.Put(pod("gpu-1", "training", "c", map[string]string{"v": "3"}))
	require.Eventually(t, seen(w, "training", "c"), 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, "Bearer t3", lastRequest(t, srv, true).Authorization)
	assert.Equal(t, 1, logs.FilterMessageSnippet("cannot watch").Len(), "logged once")
	assert.Equal(t, 1, logs.FilterMessageSnippet("watching this node's pods again").Len())
	assert.NotNil(t, w.Labels("training", "a"), "the labels read stay while the watch fails")
}

// Failing (403, 500, a broken connection) is logged once; working again
// once; the labels last read are served meanwhile.
func TestFailingLoggedOnceThenRecovered(t *testing.T) {
	srv := fakeServer(t, pod("gpu-1", "training", "a", map[string]string{"v": "1"}))
	var failures atomic.Int32
	failures.Store(-1) // not yet
	srv.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if failures.Load() <= 0 {
			return false
		}
		switch failures.Add(-1) % 3 {
		case 0:
			fakeapi.Status(w, http.StatusForbidden, "Forbidden", `pods is forbidden: User "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent" cannot watch resource "pods"`)
		case 1:
			fakeapi.Status(w, http.StatusInternalServerError, "InternalError", "etcd is sad")
		default:
			panic(http.ErrAbortHandler) // the connection cut
		}
		return true
	}
	core, logs := observer.New(zap.InfoLevel)
	w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, zap.New(core))
	require.Eventually(t, func() bool { return srv.Count(true) == 1 }, 30*time.Second, 10*time.Millisecond)

	failures.Store(7)
	srv.CloseWatches()
	require.Eventually(t, func() bool { return failures.Load() == 0 }, 30*time.Second, 10*time.Millisecond)
	srv.Put(pod("gpu-1", "training", "b", map[string]string{"v": "2"}))
	require.Eventually(t, seen(w, "training", "b"), 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("watching this node's pods again").Len() == 1 }, 30*time.Second, 10*time.Millisecond)
	failing := logs.FilterMessageSnippet("cannot watch")
	require.Equal(t, 1, failing.Len(), "logged once")
	assert.Equal(t, zap.WarnLevel, failing.All()[0].Level)
	assert.NotNil(t, w.Labels("training", "a"))
	assert.Equal(t, 1, srv.Count(false), "watch errors do not list again")
}

// An API server that ignores the field selector: at most MaxPods pods are
// held, logged once.
func TestMaxPods(t *testing.T) {
	srv := fakeServer(t)
	for i := range MaxPods + 10 {
		srv.Put(pod("gpu-1", "ns", "p"+strconv.Itoa(i), map[string]string{"i": "x"}))
	}
	core, logs := observer.New(zap.InfoLevel)
	w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, zap.New(core))
	w.mu.RLock()
	n := len(w.pods)
	w.mu.RUnlock()
	assert.Equal(t, MaxPods, n)
	srv.Put(pod("gpu-1", "ns", "one-more", map[string]string{"i": "x"}))
	srv.Put(pod("gpu-1", "ns", "p0", map[string]string{"i": "y"})) // held: updated
	require.Eventually(t, func() bool {
		l := w.Labels("ns", "p0")
		return len(l) == 1 && l[0].Value == "y"
	}, 30*time.Second, 10*time.Millisecond)
	assert.Nil(t, w.Labels("ns", "one-more"))
	assert.Equal(t, 1, logs.FilterMessageSnippet("more pods").Len())
}

// Stop ends the Watcher wherever it is (goleak, TestMain, checks that no
// goroutine is left): in a watch, in a backoff, before Start.
func TestStop(t *testing.T) {
	t.Run("watching", func(t *testing.T) {
		srv := fakeServer(t, pod("gpu-1", "training", "a", nil))
		w := watch(t, client(t, srv, Config{}), Settings{Node: "gpu-1"}, nil)
		require.Eventually(t, func() bool { return srv.Count(true) == 1 }, 30*time.Second, 10*time.Millisecond)
		w.Stop()
		w.Stop()
	})
	t.Run("backing off", func(t *testing.T) {
		srv := fakeServer(t)
		srv.Intercept = func(w http.ResponseWriter, _ *http.Request) bool {
			fakeapi.Status(w, http.StatusServiceUnavailable, "ServiceUnavailable", "down")
			return true
		}
		w, err := New(client(t, srv, Config{}), Settings{Node: "gpu-1"}, nil)
		require.NoError(t, err)
		w.backoff = backoff{initial: time.Hour, max: time.Hour}
		w.Start()
		require.Eventually(t, func() bool { return len(srv.Requests()) == 1 }, 30*time.Second, 10*time.Millisecond)
		w.Stop()
		assert.False(t, w.HasSynced())
	})
	t.Run("in a list", func(t *testing.T) {
		srv := fakeServer(t)
		started := make(chan struct{})
		srv.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
			close(started)
			<-r.Context().Done() // never answers
			return true
		}
		w, err := New(client(t, srv, Config{}), Settings{Node: "gpu-1"}, nil)
		require.NoError(t, err)
		w.Start()
		<-started
		w.Stop()
	})
	t.Run("not started", func(t *testing.T) {
		w, err := New(client(t, fakeServer(t), Config{}), Settings{Node: "gpu-1"}, nil)
		require.NoError(t, err)
		w.Stop()
		w.Start() // after Stop: nothing
		assert.False(t, w.HasSynced())
	})
}

func TestBackoffJitterAndCap(t *testing.T) {
	b := backoff{initial: 800 * time.Millisecond, max: 30 * time.Second}
	var steps []time.Duration
	for range 8 {
		d := b.next()
		assert.GreaterOrEqual(t, d, b.cur/2)
		assert.Less(t, d, b.cur*3/2)
		steps = append(steps, b.cur)
	}
	assert.Equal(t, []time.Duration{800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond,
		6400 * time.Millisecond, 12800 * time.Millisecond, 25600 * time.Millisecond, 30 * time.Second, 30 * time.Second}, steps)
	b.reset()
	b.next()
	assert.Equal(t, 800*time.Millisecond, b.cur, "reset: from the start")
	seenDifferent := false
	first := b.next()
	for range 50 {
		b.reset()
		if b.next() != first {
			seenDifferent = true
			break
		}
	}
	assert.True(t, seenDifferent, "jittered")
}
