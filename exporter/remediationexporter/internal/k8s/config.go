// Package k8s is the Kubernetes actuator.Platform: it cordons, taints and
// marks nodes through the API server, keeps the cluster-wide quarantine
// budget in a ConfigMap and elects one active remediator with a Lease.
package k8s // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/k8s"

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults. Everything this exporter writes lives under the otelcol-gpu.io
// prefix so an operator can tell it apart from other writers.
const (
	DefaultTaintKey         = "otelcol-gpu.io/gpu-fault"
	DefaultConditionType    = "GPUHealthy"
	DefaultMaintenanceLabel = "otelcol-gpu.io/maintenance"
	// DefaultGPUNodeLabel is what NVIDIA's GPU feature discovery puts on a
	// node with GPUs; it stays when every GPU fell off the bus.
	DefaultGPUNodeLabel    = "nvidia.com/gpu.present=true"
	DefaultNamespace       = "otelcol-gpu"
	DefaultBreakerName     = "remediation-breaker"
	DefaultLeaseName       = "remediation-leader"
	DefaultBreakerMaxShare = 0.1
	DefaultBreakerWindow   = time.Hour
	DefaultLeaseDuration   = 15 * time.Second
)

// Repair carriers: who carries out the repairs (reboot, GPU reset) the
// exporter asks of the platform (`kubernetes.repair`).
const (
	// RepairNone: the platform carries out no repair; the exporter asks the
	// node's agent (GPU reset) and the generic maintenance webhook.
	RepairNone = "none"
	// RepairNVSentinel: RebootNode and GPUReset objects
	// (janitor.dgxc.nvidia.com/v1alpha1) for NVIDIA NVSentinel's janitor.
	RepairNVSentinel = "nvsentinel"
)

// Config is the `kubernetes:` section of the remediation exporter.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file; empty means the
	// in-cluster service account.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// TaintKey is the key of the taint this exporter adds; its value is the
	// fault type.
	TaintKey string `mapstructure:"taint_key"`
	// TaintEffect is NoSchedule (default) or NoExecute. NoExecute evicts
	// every pod that does not tolerate it, so it must be asked for.
	TaintEffect string `mapstructure:"taint_effect"`
	// ConditionType is the node condition set False on quarantine and True
	// on release.
	ConditionType string `mapstructure:"condition_type"`
	// MaintenanceLabel: nodes carrying this label (any value) are left alone.
	MaintenanceLabel string `mapstructure:"maintenance_label"`
	// GPUNodeLabel ("key=value", or "key" for any value) marks a node as
	// having GPUs; so does a non-zero nvidia.com/gpu capacity or
	// allocatable. A node with neither is never quarantined (a control-plane
	// or CPU node). Empty: capacity and allocatable only. Default
	// nvidia.com/gpu.present=true.
	GPUNodeLabel string `mapstructure:"gpu_node_label"`
	// GPUNodeSelector, when set, narrows the GPU nodes to those it matches:
	// the breaker's and max_quarantined_fraction's shares are taken of
	// them, and a node outside it is never quarantined.
	GPUNodeSelector string `mapstructure:"gpu_node_selector"`
	// Evict enables the evict action (pods requesting nvidia.com/gpu on the
	// node are evicted through the Eviction API, honouring disruption
	// budgets). Off, the evict action is skipped; RBAC needs pods/eviction
	// only when on.
	Evict bool `mapstructure:"evict"`
	// DeviceTaints narrows P1/P2 faults of one GPU to that GPU: a DRA
	// DeviceTaintRule (resource.k8s.io/v1) on the ResourceSlice device
	// whose uuid attribute is the GPU's UUID, instead of cordon and taint.
	// Where the API or the device is missing, the node is cordoned and
	// tainted as before. RBAC needs devicetaintrules and resourceslices.
	DeviceTaints bool `mapstructure:"device_taints"`
	// Repair names who carries out the repairs the exporter asks of the
	// platform: "none" (default: the agent and the maintenance webhook do)
	// or "nvsentinel" (RebootNode and GPUReset objects for NVSentinel's
	// janitor; its CRDs must be installed, RBAC in deploy/rbac/repair).
	Repair  string        `mapstructure:"repair"`
	Breaker BreakerConfig `mapstructure:"breaker"`
	Lease   LeaseConfig   `mapstructure:"lease"`
}

// BreakerConfig bounds the share of GPU nodes quarantined within a window.
type BreakerConfig struct {
	// MaxShare of GPU nodes (0 < MaxShare <= 1) that may be quarantined
	// within Window; the budget is at least one node.
	MaxShare float64       `mapstructure:"max_share"`
	Window   time.Duration `mapstructure:"window"`
	// Namespace and Name of the ConfigMap holding the breaker's state.
	Namespace string `mapstructure:"namespace"`
	Name      string `mapstructure:"name"`
}

// LeaseConfig names the coordination.k8s.io Lease replicas elect a leader
// with.
type LeaseConfig struct {
	Namespace string        `mapstructure:"namespace"`
	Name      string        `mapstructure:"name"`
	Duration  time.Duration `mapstructure:"duration"`
}

// NewDefaultConfig returns the defaults documented on Config.
func NewDefaultConfig() Config {
	return Config{
		TaintKey:         DefaultTaintKey,
		TaintEffect:      string(corev1.TaintEffectNoSchedule),
		ConditionType:    DefaultConditionType,
		MaintenanceLabel: DefaultMaintenanceLabel,
		GPUNodeLabel:     DefaultGPUNodeLabel,
		Repair:           RepairNone,
		Breaker: BreakerConfig{
			MaxShare:  DefaultBreakerMaxShare,
			Window:    DefaultBreakerWindow,
			Namespace: DefaultNamespace,
			Name:      DefaultBreakerName,
		},
		Lease: LeaseConfig{
			Namespace: DefaultNamespace,
			Name:      DefaultLeaseName,
			Duration:  DefaultLeaseDuration,
		},
	}
}

// Validate checks the config; the API server would reject most of these
// mistakes only at the first fault, which is too late.
func (c *Config) Validate() error {
	var errs []error
	if msgs := validation.IsQualifiedName(c.TaintKey); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("taint_key %q: %v", c.TaintKey, msgs))
	}
	switch corev1.TaintEffect(c.TaintEffect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, fmt.Errorf("taint_effect %q: must be NoSchedule or NoExecute", c.TaintEffect))
	}
	if msgs := validation.IsQualifiedName(c.ConditionType); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("condition_type %q: %v", c.ConditionType, msgs))
	}
	if c.MaintenanceLabel != "" {
		if msgs := validation.IsQualifiedName(c.MaintenanceLabel); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("maintenance_label %q: %v", c.MaintenanceLabel, msgs))
		}
	}
	if c.GPUNodeLabel != "" {
		if _, _, err := parseGPUNodeLabel(c.GPUNodeLabel); err != nil {
			errs = append(errs, fmt.Errorf("gpu_node_label %q: %w", c.GPUNodeLabel, err))
		}
	}
	if c.GPUNodeSelector != "" {
		if _, err := labels.Parse(c.GPUNodeSelector); err != nil {
			errs = append(errs, fmt.Errorf("gpu_node_selector: %w", err))
		}
	}
	switch c.Repair {
	case RepairNone, RepairNVSentinel:
	default:
		errs = append(errs, fmt.Errorf("repair %q: must be %q or %q", c.Repair, RepairNone, RepairNVSentinel))
	}
	if !(c.Breaker.MaxShare > 0 && c.Breaker.MaxShare <= 1) {
		errs = append(errs, fmt.Errorf("breaker.max_share %v: must be in (0, 1]", c.Breaker.MaxShare))
	}
	if c.Breaker.Window <= 0 {
		errs = append(errs, errors.New("breaker.window: must be positive"))
	}
	errs = append(errs, validateObjectName("breaker", c.Breaker.Namespace, c.Breaker.Name)...)
	errs = append(errs, validateObjectName("lease", c.Lease.Namespace, c.Lease.Name)...)
	// leaderelection needs renew deadline > retry period × 1.2; below a
	// second the replicas would spend their time renewing.
	if c.Lease.Duration < time.Second {
		errs = append(errs, fmt.Errorf("lease.duration %v: must be at least 1s", c.Lease.Duration))
	}
	return errors.Join(errs...)
}

// parseGPUNodeLabel splits "key=value" or "key" (any value: value "" and
// any true).
func parseGPUNodeLabel(s string) (key, value string, err error) {
	key, value, hasValue := strings.Cut(s, "=")
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return "", "", fmt.Errorf("key %q: %v", key, msgs)
	}
	if hasValue {
		if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 || value == "" {
			return "", "", fmt.Errorf("value %q: must be a non-empty label value", value)
		}
	}
	return key, value, nil
}

func validateObjectName(section, namespace, name string) []error {
	var errs []error
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("%s.namespace %q: %v", section, namespace, msgs))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("%s.name %q: %v", section, name, msgs))
	}
	return errs
}
