package exportersrc

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixtureServer serves each testdata page at /<file name> and records the
// Accept header of the last request.
func fixtureServer(t *testing.T) (*httptest.Server, *atomic.Value) {
	t.Helper()
	var accept atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept.Store(r.Header.Get("Accept"))
		name := strings.TrimPrefix(r.URL.Path, "/")
		for _, f := range allFixtures {
			if f == name {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
				_, _ = w.Write(readFixture(t, f))
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &accept
}

// startSource starts a source on url and shuts it down at the end of the test.
func startSource(t *testing.T, url string, timeout time.Duration, sink func(model.XIDEvent)) *Source {
	t.Helper()
	src := New(url, timeout, "", zap.NewNop())
	require.NoError(t, src.Start(context.Background(), sink))
	t.Cleanup(func() { assert.NoError(t, src.Shutdown(context.Background())) })
	return src
}

func deviceFields() []model.FieldID {
	var ids []model.FieldID
	for _, f := range model.Catalogue {
		if !f.Profiling {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

func profilingFields() []model.FieldID {
	var ids []model.FieldID
	for _, f := range model.Catalogue {
		if f.Profiling {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

func TestCollectServedFixtures(t *testing.T) {
	srv, accept := fixtureServer(t)
	src := startSource(t, srv.URL+"/"+fixtureL4, time.Second, nil)

	snap, err := src.Collect(context.Background(), nil)
	require.NoError(t, err)
	assert.Contains(t, accept.Load(), "text/plain;version=0.0.4")
	assert.WithinDuration(t, time.Now(), snap.Time, time.Minute)
	require.Len(t, snap.GPUs, 1)
	gpu := snap.GPUs[0]
	assert.Equal(t, "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c", gpu.GPU.UUID)
	assert.Equal(t, 210.0, mustValue(t, gpu, model.FieldSMClock).Float)
	assert.Equal(t, 16.365, mustValue(t, gpu, model.FieldPowerUsage).Float)
	assert.Equal(t, model.Value{Field: model.FieldTotalEnergy, Int: 4742776}, mustValue(t, gpu, model.FieldTotalEnergy))
	assert.Len(t, gpu.Values, 23)

	for _, name := range allFixtures {
		t.Run(name, func(t *testing.T) {
			src := startSource(t, srv.URL+"/"+name, time.Second, nil)
			snap, err := src.Collect(context.Background(), nil)
			require.NoError(t, err)
			require.Len(t, snap.GPUs, 1)
			assertNoSentinels(t, snap)
		})
	}
}

func TestCollectReturnsOnlyRequestedFields(t *testing.T) {
	srv, _ := fixtureServer(t)

	l40s := startSource(t, srv.URL+"/"+fixtureL40S, time.Second, nil)
	snap, err := l40s.Collect(context.Background(), deviceFields())
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 1)
	assert.Len(t, snap.GPUs[0].Values, 18)
	for _, v := range snap.GPUs[0].Values {
		f, _ := model.FieldByID(v.Field)
		assert.Falsef(t, f.Profiling, "device collection returned %s", f.Name)
	}

	snap, err = l40s.Collect(context.Background(), profilingFields())
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 1)
	var got []model.FieldID
	for _, v := range snap.GPUs[0].Values {
		got = append(got, v.Field)
	}
	assert.Equal(t, pageProfilingFields, got)

	snap, err = l40s.Collect(context.Background(), []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 1)
	assert.Equal(t, []model.Value{{Field: model.FieldGPUTemp, Float: 32, IsFloat: true}}, snap.GPUs[0].Values)

	// The vGPU has no profiling field: no GPU comes back, and that is no error.
	vgpu := startSource(t, srv.URL+"/"+fixtureVGPU, time.Second, nil)
	snap, err = vgpu.Collect(context.Background(), profilingFields())
	require.NoError(t, err)
	assert.Empty(t, snap.GPUs)
}

func TestCollectErrorsNameTheEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/unavailable":
			http.Error(w, "dcgm not ready", http.StatusServiceUnavailable)
		case "/garbage":
			_, _ = w.Write([]byte("<html>\x00\xff{{{ not metrics"))
		case "/protobuf":
			w.Header().Set("Content-Type", `application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited`)
			_, _ = w.Write([]byte{0x0a, 0x03})
		}
	}))
	defer srv.Close()

	for path, want := range map[string]string{
		"/unavailable": "HTTP status 503 Service Unavailable",
		"/garbage":     "parsing metrics text",
		"/protobuf":    "is not the text format",
	} {
		t.Run(path, func(t *testing.T) {
			src := startSource(t, srv.URL+path, time.Second, nil)
			_, err := src.Collect(context.Background(), nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "dcgmreceiver: exporter: scraping "+srv.URL+path)
			assert.Contains(t, err.Error(), want)
		})
	}

	t.Run("connection refused", func(t *testing.T) {
		closed := httptest.NewServer(http.NotFoundHandler())
		url := closed.URL + "/metrics"
		closed.Close()
		src := startSource(t, url, time.Second, nil)
		_, err := src.Collect(context.Background(), nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "dcgmreceiver: exporter: scraping "+url)
	})
}

func TestCollectErrorsHideCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1) + "/metrics"
	src := startSource(t, url, time.Second, nil)
	_, err := src.Collect(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "403")
	assert.NotContains(t, err.Error(), "s3cret")
}

// blockingServer never answers until the client gives up.
func blockingServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCollectTimeout(t *testing.T) {
	srv := blockingServer(t)
	src := startSource(t, srv.URL+"/metrics", 50*time.Millisecond, nil)
	start := time.Now()
	_, err := src.Collect(context.Background(), nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "dcgmreceiver: exporter: scraping "+srv.URL+"/metrics")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestCollectHonoursContext(t *testing.T) {
	srv := blockingServer(t)
	src := startSource(t, srv.URL+"/metrics", time.Hour, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := src.Collect(ctx, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), srv.URL+"/metrics")

	// A Collect waiting for another one to finish gives up with its context.
	first := make(chan error, 1)
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	go func() {
		_, err := src.Collect(firstCtx, nil)
		first <- err
	}()
	require.Eventually(t, func() bool { return len(src.scrapeSlot) == 1 }, 5*time.Second, time.Millisecond)
	waiting, cancelWaiting := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelWaiting()
	_, err = src.Collect(waiting, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "waiting for the previous scrape")
	cancelFirst()
	assert.ErrorIs(t, <-first, context.Canceled)
}

func TestStartValidatesEndpoint(t *testing.T) {
	for _, endpoint := range []string{"", "localhost:9400", "ftp://host/metrics", "http://", "http://[::1", "unix:///run/dcgm.sock"} {
		t.Run(endpoint, func(t *testing.T) {
			assert.Error(t, ValidateEndpoint(endpoint))
			src := New(endpoint, 0, "", nil)
			err := src.Start(context.Background(), nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "dcgmreceiver: exporter: endpoint")
			_, err = src.Collect(context.Background(), nil)
			assert.ErrorContains(t, err, "before Start")
			assert.NoError(t, src.Shutdown(context.Background()))
		})
	}
	assert.NoError(t, ValidateEndpoint("http://localhost:9400/metrics"))
	assert.NoError(t, ValidateEndpoint("https://dcgm-exporter.gpu-operator.svc:9400/metrics"))
}

func TestNewDefaults(t *testing.T) {
	src := New("http://localhost:9400/metrics", 0, "", nil)
	assert.Equal(t, DefaultTimeout, src.timeout)
	assert.NotNil(t, src.logger)
}

func TestCollectAfterShutdownFails(t *testing.T) {
	srv, _ := fixtureServer(t)
	src := New(srv.URL+"/"+fixtureL4, time.Second, "", zap.NewNop())
	require.NoError(t, src.Start(context.Background(), nil))
	_, err := src.Collect(context.Background(), nil)
	require.NoError(t, err)
	require.NoError(t, src.Shutdown(context.Background()))
	_, err = src.Collect(context.Background(), nil)
	assert.ErrorContains(t, err, "before Start")
}

func TestCollectLogsStats(t *testing.T) {
	srv, _ := fixtureServer(t)
	core, logs := observer.New(zap.DebugLevel)
	src := New(srv.URL+"/"+fixtureREADME, time.Second, "", zap.New(core))
	require.NoError(t, src.Start(context.Background(), nil))
	defer func() { require.NoError(t, src.Shutdown(context.Background())) }()
	_, err := src.Collect(context.Background(), nil)
	require.NoError(t, err)
	scraped := logs.FilterMessage("Scraped dcgm-exporter").All()
	require.Len(t, scraped, 1)
	assert.Equal(t, int64(1), scraped[0].ContextMap()["sentinels"])
	assert.Equal(t, int64(2), scraped[0].ContextMap()["values"])
}

// xidPage is a two-GPU page with the given last XIDs.
func xidPage(xid0, xid1 int) string {
	var b strings.Builder
	b.WriteString("# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n")
	for gpu, xid := range []int{xid0, xid1} {
		fmt.Fprintf(&b, "DCGM_FI_DEV_XID_ERRORS{gpu=\"%d\",UUID=\"GPU-%d\",device=\"nvidia%d\",modelName=\"NVIDIA H100 80GB HBM3\"} %d\n", gpu, gpu, gpu, xid)
	}
	b.WriteString("# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\nDCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-0\"} 0.5\nDCGM_FI_PROF_SM_ACTIVE{gpu=\"1\",UUID=\"GPU-1\"} 0.25\n")
	return b.String()
}

func TestCollectReportsXIDChanges(t *testing.T) {
	var page atomic.Value
	page.Store(xidPage(13, 0))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(page.Load().(string)))
	}))
	defer srv.Close()

	var (
		mu     sync.Mutex
		events []model.XIDEvent
	)
	src := startSource(t, srv.URL+"/metrics", time.Second, func(e model.XIDEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	})
	collect := func(next string, fields []model.FieldID) []model.XIDEvent {
		t.Helper()
		page.Store(next)
		_, err := src.Collect(context.Background(), fields)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		got := events
		events = nil
		return got
	}

	// First scrape: an XID already showing is not reported (it may be old).
	assert.Empty(t, collect(xidPage(13, 0), nil))
	assert.Empty(t, collect(xidPage(13, 0), nil))
	// GPU 1 raises XID 79; seen even by a profiling-only collection.
	got := collect(xidPage(13, 79), profilingFields())
	require.Len(t, got, 1)
	assert.Equal(t, 79, got[0].Code)
	assert.Equal(t, "exporter", got[0].Source)
	assert.Equal(t, model.GPU{Index: 1, UUID: "GPU-1", Model: "NVIDIA H100 80GB HBM3", Device: "nvidia1"}, got[0].GPU)
	assert.WithinDuration(t, time.Now(), got[0].Time, time.Minute)
	// Same value again: invisible to this source.
	assert.Empty(t, collect(xidPage(13, 79), nil))
	// GPU 0 changes 13 -> 48.
	assert.Equal(t, []int{48}, codes(collect(xidPage(48, 79), nil)))
	// A failed scrape changes nothing.
	page.Store("garbage{")
	_, err := src.Collect(context.Background(), nil)
	require.Error(t, err)
	assert.Empty(t, collect(xidPage(48, 79), nil))
}

func TestCollectWithoutSinkDoesNotPanic(t *testing.T) {
	var page atomic.Value
	page.Store(xidPage(0, 0))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(page.Load().(string)))
	}))
	defer srv.Close()
	src := startSource(t, srv.URL, time.Second, nil)
	_, err := src.Collect(context.Background(), nil)
	require.NoError(t, err)
	page.Store(xidPage(79, 0))
	snap, err := src.Collect(context.Background(), []model.FieldID{model.FieldXIDErrors})
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 2)
	assert.Equal(t, 79.0, mustValue(t, snap.GPUs[0], model.FieldXIDErrors).Float)
}

func TestCollectConcurrentCallsAreSerialised(t *testing.T) {
	var inFlight, maxInFlight atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		_, _ = w.Write([]byte(xidPage(0, 0)))
	}))
	defer srv.Close()
	src := startSource(t, srv.URL, time.Second, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := src.Collect(context.Background(), nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, int32(1), maxInFlight.Load())
}
