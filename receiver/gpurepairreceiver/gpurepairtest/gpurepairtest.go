// Package gpurepairtest starts a real gpu_repair receiver for the tests of
// the components around it (the remediation exporter's repair loop against
// a real agent endpoint): the production API, signature checks, confirm
// over a nodestate store, verification runners and jobs; only the GPU seam
// (NVML and the reset command) is the test's, a Devices of this package.
package gpurepairtest // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/gpurepairtest"

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/testhook"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// NodeStateID is the id of the nodestate extension the agent reads (its
// verify::links::nodestate).
var NodeStateID = component.MustNewID(gpurepairreceiver.DefaultNodeStateID)

// Options are what Start starts.
type Options struct {
	// Node is the agent's host_name: the node the gateway signs for.
	Node string
	// PublicKey is the gateway's key the agent checks signatures with.
	PublicKey ed25519.PublicKey
	// Devices are the node's GPUs (NewDevices).
	Devices *Devices
	// Store is the node's own readings (what its dcgm receiver records):
	// the confirm endpoint and links_steady read it. Nil: none, the agent
	// confirms no fault.
	Store nodestate.Store
	// DiagCommand is verify::diag::command (FakeDCGMI); nil: the default.
	DiagCommand []string
	// Logs receives the gpu.repair.result records; nil: discarded.
	Logs consumer.Logs
	// Configure, when set, changes the configuration last.
	Configure func(*gpurepairreceiver.Config)
}

// Agent is a started receiver.
type Agent struct {
	receiver.Logs
	// Addr is the loopback host:port it serves plain HTTP on.
	Addr string
	// ProcRoot is its proc_root; Reboot writes its boot id.
	ProcRoot string
}

// Start starts the receiver on a free loopback port; it is shut down when
// the test ends.
func Start(tb testing.TB, o Options) *Agent {
	tb.Helper()
	require.NotNil(tb, o.Devices, "gpurepairtest: Options.Devices")
	dir := tb.TempDir()
	a := &Agent{ProcRoot: filepath.Join(dir, "proc")}
	a.Reboot(tb)
	der, err := x509.MarshalPKIXPublicKey(o.PublicKey)
	require.NoError(tb, err)
	keyFile := filepath.Join(dir, "gateway.pub")
	require.NoError(tb, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600))

	f := testhook.NewFactory(o.Devices)
	require.NotNil(tb, f)
	cfg := f.CreateDefaultConfig().(*gpurepairreceiver.Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.HostName = o.Node
	cfg.PublicKeyFile = keyFile
	cfg.ProcRoot = a.ProcRoot
	if o.DiagCommand != nil {
		cfg.Verify.Diag.Command = slices.Clone(o.DiagCommand)
	}
	exts := map[component.ID]component.Component{}
	if o.Store != nil {
		exts[NodeStateID] = storeExtension{Store: o.Store}
	} else {
		cfg.Verify.Links.NodeState = ""
	}
	if o.Configure != nil {
		o.Configure(cfg)
	}
	require.NoError(tb, cfg.Validate())
	next := o.Logs
	if next == nil {
		next = consumertest.NewNop()
	}
	rcv, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, next)
	require.NoError(tb, err)
	require.NoError(tb, rcv.Start(context.Background(), host{exts: exts}))
	tb.Cleanup(func() { require.NoError(tb, rcv.Shutdown(context.Background())) })
	a.Logs = rcv
	addr, ok := rcv.(interface{ Addr() string })
	require.True(tb, ok, "gpurepairtest: the receiver does not say its address")
	a.Addr = addr.Addr()
	return a
}

// HTTPClient is a client whose every connection goes to Addr, whatever
// the URL's host: the gateway's client (repair.NewClient with
// ClientConfig.HTTPClient) reaches node names as if DNS said loopback.
func (a *Agent) HTTPClient() *http.Client {
	var d net.Dialer
	addr := a.Addr
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// Reboot writes a new boot id under ProcRoot, as the node's kernel would
// after a reboot, and returns it.
func (a *Agent) Reboot(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(tb, err)
	h := hex.EncodeToString(b)
	id := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	d := filepath.Join(a.ProcRoot, "sys", "kernel", "random")
	require.NoError(tb, os.MkdirAll(d, 0o755))
	require.NoError(tb, os.WriteFile(filepath.Join(d, "boot_id"), []byte(id+"\n"), 0o644))
	return id
}

// storeExtension is a nodestate store as a host's extension.
type storeExtension struct {
	nodestate.Store
	component.StartFunc
	component.ShutdownFunc
}

// host is a collector host holding exts.
type host struct {
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

// Sample returns the path of a DCGM diagnostic sample of the receiver's
// verify tests (internal/verify/testdata), e.g.
// "dcgm3_r2_pass_virtualclient.json" or "dcgm4_r2_memory_fail.json".
func Sample(tb testing.TB, name string) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(tb, ok)
	p := filepath.Join(filepath.Dir(file), "..", "internal", "verify", "testdata", name)
	_, err := os.Stat(p)
	require.NoError(tb, err)
	return p
}

// DCGMI is a fake dcgmi: a shell script that appends its arguments, one
// run a line, to a file and prints a sample.
type DCGMI struct {
	// Command is verify::diag::command running it.
	Command []string
	args    string
	mu      sync.Mutex
	sample  string
	script  string
}

// FakeDCGMI writes a dcgmi printing sample (a path, Sample) in a temp dir.
func FakeDCGMI(tb testing.TB, sample string) *DCGMI {
	tb.Helper()
	dir := tb.TempDir()
	d := &DCGMI{args: filepath.Join(dir, "args"), script: filepath.Join(dir, "dcgmi")}
	d.Command = []string{d.script, "diag", "-r", gpurepairreceiver.PlaceholderLevel, "-j", "-i", gpurepairreceiver.PlaceholderGPUs}
	d.SetSample(tb, sample)
	return d
}

// SetSample makes the next runs print sample.
func (d *DCGMI) SetSample(tb testing.TB, sample string) {
	tb.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sample = sample
	// Written aside and renamed: a run in progress reads a whole script.
	tmp := d.script + ".new"
	require.NoError(tb, os.WriteFile(tmp, []byte("#!/bin/sh\necho \"$@\" >> '"+d.args+"'\ncat '"+sample+"'\n"), 0o755))
	require.NoError(tb, os.Rename(tmp, d.script))
}

// Runs returns the arguments of each run so far ("diag -r 2 -j -i 0,1").
func (d *DCGMI) Runs(tb testing.TB) []string {
	tb.Helper()
	b, err := os.ReadFile(d.args)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(tb, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// GPU is one GPU of Devices.
type GPU struct {
	UUID  string
	Index int // the driver's index, as dcgmi -i takes it
}

// Reset is one reset Devices did.
type Reset struct {
	GPU GPU
	// Idle: no process was on the GPU when it was reset.
	Idle bool
}

// Devices is a node's GPUs for the receiver: idle unless SetProcesses
// says otherwise; every reset is recorded and succeeds.
type Devices struct {
	mu     sync.Mutex
	gpus   []GPU
	procs  map[string][]int
	resets []Reset
}

var _ gpurepairreceiver.Devices = (*Devices)(nil)

// NewDevices returns idle gpus.
func NewDevices(gpus ...GPU) *Devices {
	d := &Devices{gpus: slices.Clone(gpus), procs: map[string][]int{}}
	for _, g := range gpus {
		d.procs[g.UUID] = nil
	}
	return d
}

// SetProcesses puts pids on the GPU (none: idle).
func (d *Devices) SetProcesses(uuid string, pids ...int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.procs[uuid] = slices.Clone(pids)
}

// Resets returns the resets so far.
func (d *Devices) Resets() []Reset {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.resets)
}

// Inventory implements gpurepairreceiver.Devices.
func (d *Devices) Inventory(context.Context) ([]verify.GPU, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]verify.GPU, len(d.gpus))
	for i, g := range d.gpus {
		out[i] = verify.GPU{UUID: g.UUID, Index: g.Index}
	}
	return out, nil
}

// Processes implements gpurepairreceiver.Devices.
func (d *Devices) Processes(context.Context) (map[string][]int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]int, len(d.procs))
	for k, v := range d.procs {
		out[k] = slices.Clone(v)
	}
	return out, nil
}

// Reset implements gpurepairreceiver.Devices.
func (d *Devices) Reset(_ context.Context, g verify.GPU) (gpurepairreceiver.ResetOutcome, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resets = append(d.resets, Reset{GPU: GPU{UUID: g.UUID, Index: g.Index}, Idle: len(d.procs[g.UUID]) == 0})
	return gpurepairreceiver.ResetOutcome{ExitCode: 0, Output: "GPU " + g.UUID + " was reset (gpurepairtest)"}, nil
}

// Shutdown implements gpurepairreceiver.Devices.
func (d *Devices) Shutdown(context.Context) error { return nil }
