package k8s

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client-side rate limits. client-go's defaults (5 QPS, burst 10) would
// queue a burst of faults behind each other; the breaker, not the client,
// is what bounds how much this exporter does.
const (
	clientQPS   = 50
	clientBurst = 100
)

// NewClientset builds a clientset from cfg.Kubeconfig, or from the pod's
// service account when it is empty.
func NewClientset(cfg Config) (kubernetes.Interface, error) {
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// NewDynamicClient builds the client for the custom resources the platform
// creates (NVSentinel's RebootNode and GPUReset, repair.go), from the same
// credentials as NewClientset.
func NewDynamicClient(cfg Config) (dynamic.Interface, error) {
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(rc)
}

func restConfig(cfg Config) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.QPS, rc.Burst = clientQPS, clientBurst
	rc.UserAgent = FieldManager
	return rc, nil
}
