package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
)

// DRA device taints: one faulty GPU is tainted through a DeviceTaintRule
// (resource.k8s.io/v1, Kubernetes 1.37) instead of the whole node.
const (
	// AnnotationNode names the node a DeviceTaintRule of ours is for.
	AnnotationNode = "otelcol-gpu.io/node"
	// AnnotationGPUUUID is the GPU a DeviceTaintRule of ours taints.
	AnnotationGPUUUID = "otelcol-gpu.io/gpu-uuid"
	// UUIDAttribute is the ResourceSlice device attribute carrying the
	// GPU's UUID, as NVIDIA's DRA driver publishes it (also accepted with
	// the driver's domain, <domain>/uuid).
	UUIDAttribute = "uuid"
	// deviceTaintRulePrefix starts the name of every rule of ours.
	deviceTaintRulePrefix = "otelcol-gpu-"
)

// draDevice is a device in a ResourceSlice: what a DeviceTaintRule selects.
type draDevice struct{ driver, pool, name string }

func (d draDevice) String() string { return d.driver + "/" + d.pool + "/" + d.name }

// ruleName is stable per device, so a second fault on the same GPU, a
// retry or a second replica finds the rule instead of adding another.
func (d draDevice) ruleName() string {
	sum := sha256.Sum256([]byte(d.String()))
	return deviceTaintRulePrefix + hex.EncodeToString(sum[:10])
}

// unavailable reports an API error that means "this cluster cannot taint
// devices for us": the resource is not served (feature off, older
// Kubernetes) or RBAC does not allow it. The node actions stand in.
func unavailable(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}

// findGPU looks through the node's ResourceSlices for the device whose
// uuid attribute is uuid.
func (p *Platform) findGPU(ctx context.Context, node, uuid string) (draDevice, bool, error) {
	slices, err := p.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return draDevice{}, false, err
	}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			for name, attr := range d.Attributes {
				key := string(name)
				if (key == UUIDAttribute || strings.HasSuffix(key, "/"+UUIDAttribute)) &&
					attr.StringValue != nil && *attr.StringValue == uuid {
					return draDevice{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, name: d.Name}, true, nil
				}
			}
		}
	}
	return draDevice{}, false, nil
}

// taintDevice creates the DeviceTaintRule for req's GPU. It returns what it
// did, or why it could not (fallback) when the node actions must stand in;
// an error is transient (API server down) and retried by the exporter.
func (p *Platform) taintDevice(ctx context.Context, req actuator.Request) (done, fallback string, err error) {
	switch {
	case !p.cfg.DeviceTaints:
		return "", "kubernetes.device_taints is off", nil
	case req.GPUUUID == "":
		return "", "the fault names no GPU", nil
	}
	dev, found, err := p.findGPU(ctx, req.Node, req.GPUUUID)
	switch {
	case err != nil && unavailable(err):
		return "", "ResourceSlices (resource.k8s.io/v1) unavailable: " + err.Error(), nil
	case err != nil:
		return "", "", fmt.Errorf("list ResourceSlices of node %s: %w", req.Node, err)
	case !found:
		return "", fmt.Sprintf("no ResourceSlice device on node %s has %s=%s", req.Node, UUIDAttribute, req.GPUUUID), nil
	}
	driver, pool, device := dev.driver, dev.pool, dev.name
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{
			Name:   dev.ruleName(),
			Labels: map[string]string{LabelQuarantined: "true"},
			Annotations: map[string]string{
				AnnotationNode: req.Node, AnnotationGPUUUID: req.GPUUUID, AnnotationFaultID: req.FaultID,
			},
		},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &driver, Pool: &pool, Device: &device},
			Taint: resourcev1.DeviceTaint{
				Key: p.cfg.TaintKey, Value: labelValue(req.FaultType), Effect: resourcev1.DeviceTaintEffect(p.cfg.TaintEffect),
			},
		},
	}
	_, err = p.client.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		return fmt.Sprintf("device taint rule %s on %s (gpu %s)", rule.Name, dev, req.GPUUUID), "", nil
	case apierrors.IsAlreadyExists(err):
		return "", "", nil // another fault of ours on the same GPU made it
	case unavailable(err):
		return "", "DeviceTaintRules (resource.k8s.io/v1) unavailable: " + err.Error(), nil
	default:
		return "", "", fmt.Errorf("create DeviceTaintRule %s: %w", rule.Name, err)
	}
}

// untaintDevices deletes the DeviceTaintRules of ours for node.
func (p *Platform) untaintDevices(ctx context.Context, node string) (int, error) {
	if !p.cfg.DeviceTaints {
		return 0, nil
	}
	rules, err := p.client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: LabelQuarantined + "=true"})
	if err != nil {
		if unavailable(err) {
			return 0, nil // nothing of ours can be there
		}
		return 0, err
	}
	var removed int
	for _, r := range rules.Items {
		// Ours as we wrote it: our name, node and taint key. A rule someone
		// turned to another taint is theirs now.
		if r.Annotations[AnnotationNode] != node || !strings.HasPrefix(r.Name, deviceTaintRulePrefix) || r.Spec.Taint.Key != p.cfg.TaintKey {
			continue
		}
		err := p.client.ResourceV1().DeviceTaintRules().Delete(ctx, r.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &r.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return removed, fmt.Errorf("delete DeviceTaintRule %s: %w", r.Name, err)
		}
		removed++
	}
	return removed, nil
}
