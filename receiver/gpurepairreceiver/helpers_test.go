package gpurepairreceiver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

const (
	testNode = "node-a"
	gpu0     = "GPU-00000000-0000-4000-8000-000000000000"
	gpu1     = "GPU-11111111-1111-4111-8111-111111111111"
	testBoot = "6e4f3bb1-3a8e-4c5e-9a43-0d0c2b1e7f10"
)

func testKey(seed byte) ed25519.PrivateKey {
	s := bytes.Repeat([]byte{seed}, ed25519.SeedSize)
	return ed25519.NewKeyFromSeed(s)
}

// fakeDevices is a node with GPUs whose process lists the test sets.
type fakeDevices struct {
	mu       sync.Mutex
	gpus     []verify.GPU
	invErr   error
	procs    map[string][]int
	procsErr error
	// procsSeq, when set, answers call i (from 0) of Processes; past its
	// end the last entry repeats.
	procsSeq []map[string][]int
	calls    int
	resets   []verify.GPU
	reset    func(ctx context.Context, g verify.GPU) (ResetOutcome, error)
	shutdown bool
}

func newFakeDevices() *fakeDevices {
	return &fakeDevices{
		gpus:  []verify.GPU{{UUID: gpu0, Index: 0}, {UUID: gpu1, Index: 1}},
		procs: map[string][]int{gpu0: {}, gpu1: {}},
	}
}

func (f *fakeDevices) Inventory(context.Context) ([]verify.GPU, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.invErr != nil {
		return nil, f.invErr
	}
	return append([]verify.GPU(nil), f.gpus...), nil
}

func (f *fakeDevices) Processes(context.Context) (map[string][]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.calls++ }()
	if f.procsErr != nil {
		return nil, f.procsErr
	}
	if len(f.procsSeq) > 0 {
		return f.procsSeq[min(f.calls, len(f.procsSeq)-1)], nil
	}
	return f.procs, nil
}

func (f *fakeDevices) set(fn func(f *fakeDevices)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeDevices) Reset(ctx context.Context, g verify.GPU) (ResetOutcome, error) {
	f.mu.Lock()
	f.resets = append(f.resets, g)
	reset := f.reset
	f.mu.Unlock()
	if reset != nil {
		return reset(ctx, g)
	}
	return ResetOutcome{ExitCode: 0, Output: "GPU 00000000:17:00.0 was successfully reset."}, nil
}

func (f *fakeDevices) resetCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.resets)
}

func (f *fakeDevices) Shutdown(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutdown = true
	return nil
}

// fakeRunner answers a check with results or an error, and records what it
// was asked.
type fakeRunner struct {
	mu      sync.Mutex
	results []repair.CheckResult
	err     error
	got     []verify.Request
	block   chan struct{} // when set, Run waits for it or ctx
}

func (r *fakeRunner) Run(ctx context.Context, req verify.Request) ([]repair.CheckResult, error) {
	r.mu.Lock()
	r.got = append(r.got, req)
	block := r.block
	r.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return r.results, r.err
}

// env is a started receiver with a fake node and a signing client.
type env struct {
	t       *testing.T
	rcv     *repairReceiver
	devices *fakeDevices
	sink    *consumertest.LogsSink
	client  *repair.Client
	key     ed25519.PrivateKey
	addr    string
	logs    *observer.ObservedLogs
	tel     *componenttest.Telemetry
	cfg     *Config
	// idleDeadline fires the verification's idle_wait (the fake clock).
	idleDeadline chan time.Time
	// store is the nodestate extension "nodestate" of the host.
	store *nodestate.MemoryStore
}

// nodestateExt is a nodestate store as a host's extension.
type nodestateExt struct {
	*nodestate.MemoryStore
	component.StartFunc
	component.ShutdownFunc
}

// hostWithExtensions is a host holding exts.
type hostWithExtensions struct {
	exts map[component.ID]component.Component
}

func (h hostWithExtensions) GetExtensions() map[component.ID]component.Component { return h.exts }

// nodestateHost is a host whose extension "nodestate" is store.
func nodestateHost(store *nodestate.MemoryStore) component.Host {
	return hostWithExtensions{exts: map[component.ID]component.Component{
		component.MustNewID("nodestate"): nodestateExt{MemoryStore: store},
	}}
}

type envOption func(*env, *Config, *[]factoryOption)

func withDevices(d *fakeDevices) envOption {
	return func(e *env, _ *Config, _ *[]factoryOption) { e.devices = d }
}

func withOpt(o factoryOption) envOption {
	return func(_ *env, _ *Config, opts *[]factoryOption) { *opts = append(*opts, o) }
}

func withConfig(fn func(*Config)) envOption {
	return func(_ *env, cfg *Config, _ *[]factoryOption) { fn(cfg) }
}

func writePublicKey(t *testing.T, dir string, key ed25519.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	require.NoError(t, err)
	p := filepath.Join(dir, "gateway.pub")
	require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600))
	return p
}

func newEnv(t *testing.T, options ...envOption) *env {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proc", "sys", "kernel", "random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proc", "sys", "kernel", "random", "boot_id"), []byte(testBoot+"\n"), 0o644))
	e := &env{t: t, key: testKey(1), sink: new(consumertest.LogsSink), idleDeadline: make(chan time.Time, 1),
		store: nodestate.NewMemoryStore(nodestate.DefaultLimits())}
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.HostName = testNode
	cfg.ProcRoot = filepath.Join(dir, "proc")
	cfg.PublicKeyFile = writePublicKey(t, dir, e.key)
	cfg.Verify.IdleWait = time.Hour // the fake clock fires it (idleDeadline)
	cfg.Verify.IdlePollInterval = time.Millisecond
	var opts []factoryOption
	for _, o := range options {
		o(e, cfg, &opts)
	}
	if e.devices == nil {
		e.devices = newFakeDevices()
	}
	require.NoError(t, cfg.Validate())
	e.cfg = cfg
	devices := e.devices
	base := []factoryOption{func(o *factoryOptions) {
		o.devices = func(*Config) Devices { return devices }
		o.runners = func(*Config, receiver.Settings, nodestate.Store) (map[repair.Check]verify.Runner, error) {
			return nil, nil
		}
		o.after = func(d time.Duration) <-chan time.Time {
			if d == cfg.Verify.IdleWait {
				return e.idleDeadline
			}
			return time.After(d) // the poll interval: a millisecond
		}
	}}
	f := newFactory(append(base, opts...)...)
	core, logs := observer.New(zap.InfoLevel)
	e.logs = logs
	e.tel = componenttest.NewTelemetry()
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	set.TelemetrySettings = e.tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	r, err := f.CreateLogs(context.Background(), set, cfg, e.sink)
	require.NoError(t, err)
	e.rcv = r.(*repairReceiver)
	require.NoError(t, e.rcv.Start(context.Background(), nodestateHost(e.store)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, e.rcv.Shutdown(ctx))
		require.NoError(t, e.tel.Shutdown(context.Background()))
	})
	e.addr = e.rcv.Addr()
	e.client = e.newClient(e.key)
	return e
}

// newClient returns a client signing with key whose every node resolves
// to the receiver.
func (e *env) newClient(key ed25519.PrivateKey) *repair.Client {
	e.t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, e.addr)
	}}
	e.t.Cleanup(tr.CloseIdleConnections)
	s, err := repair.NewSigner(key)
	require.NoError(e.t, err)
	c, err := repair.NewClient(repair.ClientConfig{URLTemplate: "http://{node}:8790", HTTPClient: &http.Client{Transport: tr}}, s)
	require.NoError(e.t, err)
	return c
}

// raw sends a request as built by the caller (signed or not).
func (e *env) raw(req *http.Request) (int, string) {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// signed builds a request to path signed with key for node.
func (e *env) signed(key ed25519.PrivateKey, method, path, node, id string, body []byte, at time.Time) *http.Request {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.addr+path, bytes.NewReader(body))
	require.NoError(e.t, err)
	s, err := repair.NewSigner(key)
	require.NoError(e.t, err)
	require.NoError(e.t, s.Sign(req, node, id, body, at))
	return req
}

// waitJob polls the job until it is final.
func (e *env) waitJob(id string) repair.Job {
	e.t.Helper()
	for {
		j, err := e.client.Job(context.Background(), testNode, id)
		require.NoError(e.t, err)
		if j.State.Final() {
			return j
		}
		time.Sleep(time.Millisecond)
	}
}

// waitState polls until the job is in state.
func (e *env) waitState(id string, state repair.JobState) repair.Job {
	e.t.Helper()
	for {
		j, err := e.client.Job(context.Background(), testNode, id)
		require.NoError(e.t, err)
		if j.State == state {
			return j
		}
		require.False(e.t, j.State.Final(), "job %s ended %s (%s) before reaching %s", id, j.State, j.Detail, state)
		time.Sleep(time.Millisecond)
	}
}

// refused returns the otelcol_gpu_repair_requests_refused count by reason.
func (e *env) refused() map[string]int64 {
	e.t.Helper()
	out := map[string]int64{}
	m, err := e.tel.GetMetric("otelcol_gpu_repair_requests_refused")
	if err != nil {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(e.t, ok)
	for _, dp := range sum.DataPoints {
		r, _ := dp.Attributes.Value(metadata.TelemetryAttrReason)
		out[r.AsString()] = dp.Value
	}
	return out
}

func statusOf(err error) int {
	var se *repair.StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return 0
}

var _ component.Host = componenttest.NewNopHost()

var errNVML = errors.New("nvml: ERROR_UNKNOWN")

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
