package attribution // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/attribution"

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// kubeletMaxMessageSize matches the kubelet's own pod-resources client: a
// node with many pods answers with more than gRPC's default 4 MiB.
const kubeletMaxMessageSize = 16 << 20

// readKubelet asks the kubelet which container holds each GPU.
func (a *Attributor) readKubelet(ctx context.Context, gpus []model.GPU) (deviceMap[podOwner], error) {
	resp, err := listPodResources(ctx, a.settings.KubeletSocket, a.settings.Timeout)
	if err != nil {
		return nil, err
	}
	pods := deviceMap[podOwner]{}
	for _, pod := range resp.GetPodResources() {
		for _, container := range pod.GetContainers() {
			owner := podOwner{name: pod.GetName(), namespace: pod.GetNamespace(), container: container.GetName()}
			for _, devices := range container.GetDevices() {
				if !isNvidiaResource(devices.GetResourceName()) {
					continue
				}
				for _, id := range devices.GetDeviceIds() {
					ref, ok := parseDeviceID(id)
					if !ok {
						a.logger.Debug("GPU attribution: kubelet device id not understood",
							zap.String("device_id", id), zap.String("resource", devices.GetResourceName()))
						continue
					}
					if !pods.add(resolveDeviceName(ref, gpus), owner, gpus) {
						a.logger.Debug("GPU attribution: GPU already owned by an earlier container; keeping that one",
							zap.String("device_id", id), zap.String("pod", owner.namespace+"/"+owner.name))
					}
				}
			}
		}
	}
	return pods, nil
}

// listPodResources makes one List call on the kubelet's unix socket. The
// connection lives for this call only: a kubelet restart replaces the
// socket, and no goroutine outlives Refresh.
func listPodResources(ctx context.Context, socket string, timeout time.Duration) (*podresourcesv1.ListPodResourcesResponse, error) {
	// Stat first: "no such file" says more than gRPC's "unavailable".
	if _, err := os.Stat(socket); err != nil {
		return nil, fmt.Errorf("dcgmreceiver: attribution: kubelet socket: %w", err)
	}
	abs, err := filepath.Abs(socket)
	if err != nil {
		return nil, fmt.Errorf("dcgmreceiver: attribution: kubelet socket %s: %w", socket, err)
	}
	conn, err := grpc.NewClient("unix://"+abs,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(kubeletMaxMessageSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("dcgmreceiver: attribution: kubelet socket %s: %w", abs, err)
	}
	defer conn.Close()

	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(callCtx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("dcgmreceiver: attribution: kubelet %s: List: %w", abs, err)
	}
	return resp, nil
}

// isNvidiaResource accepts the NVIDIA device plugin's resources: whole
// GPUs (nvidia.com/gpu, renamed shared ones such as nvidia.com/gpu.shared)
// and MIG slices (nvidia.com/mig-1g.10gb, …).
func isNvidiaResource(name string) bool {
	return name == "nvidia.com/gpu" ||
		strings.HasPrefix(name, "nvidia.com/gpu.") ||
		strings.HasPrefix(name, "nvidia.com/mig-")
}

// parseDeviceID reads the device id forms device plugins report:
//
//	GPU-<uuid>                 NVIDIA device plugin, whole GPU
//	GPU-<uuid>::<n>            the same, time-sliced replica n
//	MIG-<uuid>                 a MIG instance by its own UUID
//	MIG-GPU-<uuid>/<gi>/<ci>   a MIG instance, older plugins
//	nvidia<N>, nvidia<N>/vgpu<k>, nvidia<N>/gi<G>   GKE's plugin
//	<N>                        a bare index
func parseDeviceID(id string) (deviceRef, bool) {
	id = strings.TrimSpace(id)
	if base, _, shared := strings.Cut(id, "::"); shared {
		id = base
	}
	switch {
	case strings.HasPrefix(id, "MIG-GPU-"):
		uuid, rest, ok := strings.Cut(strings.TrimPrefix(id, "MIG-"), "/")
		if !ok {
			return deviceRef{}, false
		}
		giText, _, _ := strings.Cut(rest, "/")
		gi, ok := parseSmallUint(giText)
		if !ok || uuid == "GPU-" {
			return deviceRef{}, false
		}
		return uuidRef(uuid, gi), true
	case strings.HasPrefix(id, "GPU-") || strings.HasPrefix(id, "MIG-"):
		if len(id) == len("GPU-") || strings.ContainsAny(id, "/ ") {
			return deviceRef{}, false
		}
		return uuidRef(id, wholeGPU), true
	case strings.HasPrefix(id, "nvidia"):
		dev, suffix, _ := strings.Cut(id, "/")
		if _, ok := parseSmallUint(strings.TrimPrefix(dev, "nvidia")); !ok {
			return deviceRef{}, false
		}
		switch {
		case suffix == "" || strings.HasPrefix(suffix, "vgpu"):
			return deviceNameRef(dev, wholeGPU), true
		case strings.HasPrefix(suffix, "gi"):
			gi, ok := parseSmallUint(strings.TrimPrefix(suffix, "gi"))
			if !ok {
				return deviceRef{}, false
			}
			return deviceNameRef(dev, gi), true
		}
		return deviceRef{}, false
	}
	if index, ok := parseSmallUint(id); ok {
		return indexRef(index, wholeGPU), true
	}
	return deviceRef{}, false
}

// resolveDeviceName turns nvidia<N> into index N when no GPU of the list
// carries device names: the minor number equals the index on every
// driver we know, but a GPU list with names is the better witness.
func resolveDeviceName(ref deviceRef, gpus []model.GPU) deviceRef {
	if ref.kind != byDevice {
		return ref
	}
	for _, gpu := range gpus {
		if gpu.Device != "" {
			return ref
		}
	}
	index, _ := parseSmallUint(strings.TrimPrefix(ref.name, "nvidia"))
	return indexRef(index, ref.gpuInstance)
}

// parseSmallUint parses a decimal GPU index or instance id; anything else,
// including values too large to be one, is rejected.
func parseSmallUint(s string) (int, bool) {
	if s == "" || len(s) > 6 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
