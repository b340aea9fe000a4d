package attribution

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// fakeKubelet serves the pod-resources API the way the kubelet does.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	mu    sync.Mutex
	pods  []*podresourcesv1.PodResources
	err   error
	hang  bool // answer only when the caller gives up
	calls int
}

func (f *fakeKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	f.mu.Lock()
	f.calls++
	pods, err, hang := f.pods, f.err, f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: pods}, nil
}

func (f *fakeKubelet) set(pods []*podresourcesv1.PodResources, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods, f.err = pods, err
}

// shortSocketPath returns a socket path in a fresh directory under the
// system temp dir: t.TempDir() paths can pass the ~108-byte socket limit.
func shortSocketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pr")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "kubelet.sock")
}

// serveKubelet serves srv on socket until the returned stop is called or
// the test ends.
func serveKubelet(t *testing.T, socket string, srv *fakeKubelet) (stop func()) {
	t.Helper()
	lis, err := net.Listen("unix", socket)
	require.NoError(t, err)
	server := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(server, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = server.Serve(lis)
	}()
	stop = sync.OnceFunc(func() {
		server.Stop()
		<-served
	})
	t.Cleanup(stop)
	return stop
}

func pod(namespace, name string, containers ...*podresourcesv1.ContainerResources) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Name: name, Namespace: namespace, Containers: containers}
}

func container(name, resource string, ids ...string) *podresourcesv1.ContainerResources {
	return &podresourcesv1.ContainerResources{
		Name:    name,
		Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}},
	}
}

// Four whole GPUs and two MIG instances of a fifth, as DCGM lists them.
var testGPUs = []model.GPU{
	{Index: 0, UUID: "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c", Device: "nvidia0"},
	{Index: 1, UUID: "GPU-5fbe9a3a-d7bd-0a64-3bd5-b5bc8c9c3bd6", Device: "nvidia1"},
	{Index: 2, UUID: "GPU-8a7b6c5d-4e3f-2a1b-0c9d-8e7f6a5b4c3d", Device: "nvidia2"},
	{Index: 3, UUID: "GPU-11111111-2222-3333-4444-555555555555", Device: "nvidia3"},
	{Index: 4, UUID: "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", Device: "nvidia4", MIG: &model.MIGInstance{GPUInstanceID: 1, Profile: "3g.40gb"}},
	{Index: 4, UUID: "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", Device: "nvidia4", MIG: &model.MIGInstance{GPUInstanceID: 2, Profile: "3g.40gb"}},
}

func kubeletOnly(socket string) Settings {
	return Settings{Kubelet: true, KubeletSocket: socket, Timeout: 2 * time.Second}
}

func TestKubeletMapsDevicesByUUIDIndexAndName(t *testing.T) {
	socket := shortSocketPath(t)
	srv := &fakeKubelet{}
	srv.set([]*podresourcesv1.PodResources{
		pod("ml", "trainer-0",
			container("sidecar", "cpu", "0"), // not a GPU: ignored
			container("trainer", "nvidia.com/gpu", testGPUs[0].UUID)),
		pod("ml", "by-index", container("main", "nvidia.com/gpu", "1")),
		pod("gke", "by-name", container("main", "nvidia.com/gpu", "nvidia2/vgpu0")),
		// Time-sliced replicas of GPU 3: the first container listed keeps it.
		pod("shared", "first", container("a", "nvidia.com/gpu.shared", testGPUs[3].UUID+"::0")),
		pod("shared", "second", container("b", "nvidia.com/gpu.shared", testGPUs[3].UUID+"::1")),
		pod("mig", "slice", container("c", "nvidia.com/mig-3g.40gb", "MIG-"+testGPUs[4].UUID+"/2/0")),
	}, nil)
	serveKubelet(t, socket, srv)

	a, err := New(kubeletOnly(socket), zaptest.NewLogger(t))
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), testGPUs, nil))

	want := []model.Owner{
		{PodName: "trainer-0", Namespace: "ml", Container: "trainer"},
		{PodName: "by-index", Namespace: "ml", Container: "main"},
		{PodName: "by-name", Namespace: "gke", Container: "main"},
		{PodName: "first", Namespace: "shared", Container: "a"},
		{}, // GPU instance 1 of GPU 4 is free
		{PodName: "slice", Namespace: "mig", Container: "c"},
	}
	for i, gpu := range testGPUs {
		assert.Equal(t, want[i], a.Owner(gpu), "GPU %d (%d)", i, gpu.Index)
	}
	// The index-named GPU is found by UUID alone, and the UUID-named one
	// by index or device name alone.
	assert.Equal(t, "by-index", a.Owner(model.GPU{Index: 99, UUID: testGPUs[1].UUID}).PodName)
	assert.Equal(t, "trainer-0", a.Owner(model.GPU{Index: 0}).PodName)
	assert.Equal(t, "by-name", a.Owner(model.GPU{Index: 99, Device: "nvidia2"}).PodName)
	assert.Equal(t, model.Owner{}, a.Owner(model.GPU{Index: 7, UUID: "GPU-unknown"}))
}

func TestKubeletDeviceNamesWithoutGPUList(t *testing.T) {
	socket := shortSocketPath(t)
	srv := &fakeKubelet{}
	srv.set([]*podresourcesv1.PodResources{
		pod("gke", "p", container("c", "nvidia.com/gpu", "nvidia5")),
		pod("gke", "q", container("c", "nvidia.com/mig-1g.10gb", "nvidia6/gi3")),
	}, nil)
	serveKubelet(t, socket, srv)

	a, err := New(kubeletOnly(socket), zaptest.NewLogger(t))
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), nil, nil))
	// No GPU list names devices: nvidia<N> is taken as index N.
	assert.Equal(t, "p", a.Owner(model.GPU{Index: 5}).PodName)
	assert.Equal(t, "q", a.Owner(model.GPU{Index: 6, MIG: &model.MIGInstance{GPUInstanceID: 3}}).PodName)
	assert.Empty(t, a.Owner(model.GPU{Index: 6, MIG: &model.MIGInstance{GPUInstanceID: 4}}).PodName)
}

func TestKubeletHangingCallIsBoundedByTimeout(t *testing.T) {
	socket := shortSocketPath(t)
	srv := &fakeKubelet{hang: true}
	serveKubelet(t, socket, srv)

	set := kubeletOnly(socket)
	set.Timeout = 100 * time.Millisecond
	a, err := New(set, zaptest.NewLogger(t))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, a.Refresh(context.Background(), testGPUs, nil))
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.True(t, a.kubelet.failing)
	assert.True(t, a.Owner(testGPUs[0]).IsZero())
}

func TestKubeletErrorStatusMarksSourceFailing(t *testing.T) {
	socket := shortSocketPath(t)
	srv := &fakeKubelet{}
	srv.set(nil, status.Error(codes.PermissionDenied, "pod resources: access denied"))
	serveKubelet(t, socket, srv)

	a, err := New(kubeletOnly(socket), zaptest.NewLogger(t))
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), testGPUs, nil))
	assert.True(t, a.kubelet.failing)
	assert.Equal(t, 1, srv.calls)
}

func TestIsNvidiaResource(t *testing.T) {
	for name, want := range map[string]bool{
		"nvidia.com/gpu":          true,
		"nvidia.com/gpu.shared":   true,
		"nvidia.com/mig-1g.10gb":  true,
		"nvidia.com/mig-3g.40gb":  true,
		"nvidia.com/gpus":         false,
		"amd.com/gpu":             false,
		"cpu":                     false,
		"example.com/nvidia.com/": false,
	} {
		assert.Equal(t, want, isNvidiaResource(name), name)
	}
}

func TestParseDeviceID(t *testing.T) {
	const uuid = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
	tests := []struct {
		id   string
		want deviceRef
		ok   bool
	}{
		{uuid, uuidRef(uuid, wholeGPU), true},
		{uuid + "::3", uuidRef(uuid, wholeGPU), true},
		{"MIG-5b1d4b5e-2c14-5b44-9f1a-0b4f8e6f2c3d", uuidRef("MIG-5b1d4b5e-2c14-5b44-9f1a-0b4f8e6f2c3d", wholeGPU), true},
		{"MIG-" + uuid + "/7/0", uuidRef(uuid, 7), true},
		{"nvidia0", deviceNameRef("nvidia0", wholeGPU), true},
		{"nvidia12/vgpu3", deviceNameRef("nvidia12", wholeGPU), true},
		{"nvidia1/gi2", deviceNameRef("nvidia1", 2), true},
		{"3", indexRef(3, wholeGPU), true},
		{" 4 ", indexRef(4, wholeGPU), true},
		{"", deviceRef{}, false},
		{"GPU-", deviceRef{}, false},
		{"MIG-GPU-", deviceRef{}, false},
		{"MIG-" + uuid, deviceRef{}, false}, // the old form without instance ids
		{"MIG-" + uuid + "/x/0", deviceRef{}, false},
		{"nvidia", deviceRef{}, false},
		{"nvidiactl", deviceRef{}, false},
		{"nvidia1/gix", deviceRef{}, false},
		{"nvidia1/other", deviceRef{}, false},
		{"-1", deviceRef{}, false},
		{"99999999999999999999", deviceRef{}, false},
		{"some-device", deviceRef{}, false},
	}
	for _, tt := range tests {
		got, ok := parseDeviceID(tt.id)
		assert.Equal(t, tt.ok, ok, "%q", tt.id)
		assert.Equal(t, tt.want, got, "%q", tt.id)
	}
}

func FuzzParseDeviceID(f *testing.F) {
	for _, seed := range []string{
		"GPU-c2f76b33-7953-256e-8f33-1343419b1a1c", "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c::2",
		"MIG-GPU-c2f76b33-7953-256e-8f33-1343419b1a1c/7/0", "MIG-5b1d4b5e-2c14-5b44-9f1a-0b4f8e6f2c3d",
		"nvidia0", "nvidia1/gi2", "nvidia3/vgpu1", "0", "", "::", "MIG-GPU-/", "nvidia/gi",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ref, ok := parseDeviceID(id)
		if !ok {
			if ref != (deviceRef{}) {
				t.Fatalf("rejected %q but returned %+v", id, ref)
			}
			return
		}
		if ref.kind < byUUID || ref.kind > byDevice || ref.gpuInstance < wholeGPU || ref.index < 0 {
			t.Fatalf("%q gave an invalid reference %+v", id, ref)
		}
		// Whatever it names must be usable as a map key for a GPU.
		m := deviceMap[int]{}
		m.add(ref, 1, testGPUs)
	})
}
