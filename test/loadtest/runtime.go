package loadtest

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// goRuntimeVars are the environment variables through which a deployment
// sizes the Go runtime to its container.
var goRuntimeVars = []string{"GOGC", "GOMAXPROCS", "GOMEMLIMIT"}

// GoRuntime is the Go runtime settings a collector runs with in the
// harness, as NAME=value (DeployedRuntime). A variable that the harness's
// own environment sets wins: an explicit GOGC=200 overrides the
// deployment's.
type GoRuntime []string

// Env is what the collector runs with: the environment's own settings, then
// those of r that it does not override.
func (r GoRuntime) Env() []string {
	var env []string
	for _, name := range goRuntimeVars {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return append(env, r.added()...)
}

// added is r less what the environment overrides: the collector inherits
// the environment, so these are added to it.
func (r GoRuntime) added() []string {
	return slices.DeleteFunc(slices.Clone(r), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		_, set := os.LookupEnv(name)
		return set
	})
}

// workload is the part of a StatefulSet, DaemonSet or Deployment that
// DeployedRuntime reads.
type workload struct {
	Kind string `json:"kind"`
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// DeployedRuntime reads the Go runtime settings that the workload manifest
// at path gives its container named container: literal values as written,
// and a GOMAXPROCS taken from the CPU request through the downward API,
// rounded up as the kubelet does. The harness runs the collector with them,
// so that its CPU per item is the deployed collector's: the gateway's
// settings cut its CPU per span by 15-20 % (BENCHMARKS.md).
func DeployedRuntime(path, container string) (GoRuntime, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	var w workload
	if err := utilyaml.Unmarshal(doc, &w); err != nil {
		return nil, fmt.Errorf("loadtest: %s: %w", path, err)
	}
	containers := w.Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return nil, fmt.Errorf("loadtest: %s: %s has no container %q", path, w.Kind, container)
	}
	c := containers[i]
	var env GoRuntime
	for _, e := range c.Env {
		if !slices.Contains(goRuntimeVars, e.Name) {
			continue
		}
		value, err := runtimeValue(c, e)
		if err != nil {
			return nil, fmt.Errorf("loadtest: %s: container %s: %s: %w", path, container, e.Name, err)
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

// runtimeValue is e's value: literal, or c's CPU request through the
// downward API.
func runtimeValue(c corev1.Container, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	ref := e.ValueFrom.ResourceFieldRef
	if ref == nil {
		return "", fmt.Errorf("only literal values and resourceFieldRef are read")
	}
	if ref.Resource != "requests.cpu" {
		return "", fmt.Errorf("resourceFieldRef %s is not read", ref.Resource)
	}
	q := c.Resources.Requests[corev1.ResourceCPU]
	if q.IsZero() {
		return "", fmt.Errorf("resourceFieldRef %s: the container sets none", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	return fmt.Sprint(int64(math.Ceil(q.AsApproximateFloat64() / divisor.AsApproximateFloat64()))), nil
}
