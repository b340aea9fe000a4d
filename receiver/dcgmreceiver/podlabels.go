package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"
)

// podLabeler holds the labels of the node's pods (internal/podlabels).
type podLabeler interface {
	Start()
	Stop()
	// Labels' slice is shared: read it, never change it.
	Labels(namespace, name string) []podlabels.Label
}

// clusterPodLabels watches the node's pods through the API server named by
// newClient (the in-cluster config: the pod's service-account token; no
// Kubernetes client library, internal/podlabels' own list and watch). The
// client is made at Start, so that a config is validated anywhere; without
// a cluster the series go out without pod labels, and that is logged.
type clusterPodLabels struct {
	settings  podlabels.Settings
	logger    *zap.Logger
	newClient func() (*podlabels.Client, error)
	watcher   atomic.Pointer[podlabels.Watcher]
}

func newPodLabeler(cfg *Config, logger *zap.Logger) podLabeler {
	k := cfg.Attribution.Kubernetes
	if !k.Enabled || !k.PodLabels {
		return nil
	}
	return &clusterPodLabels{
		settings:  podlabels.Settings{Node: k.NodeName, Allowlist: k.PodLabelAllowlist},
		logger:    logger,
		newClient: inClusterClient,
	}
}

func inClusterClient() (*podlabels.Client, error) {
	rc, err := podlabels.InClusterConfig()
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "otelcol-gpu-agent (dcgm receiver, pod labels)"
	return podlabels.NewClient(rc)
}

func (c *clusterPodLabels) Start() {
	client, err := c.newClient()
	if err != nil {
		c.logger.Warn("dcgmreceiver: pod labels are off: no Kubernetes API client (not in a pod, or no service-account token mounted)", zap.Error(err))
		return
	}
	w, err := podlabels.New(client, c.settings, c.logger)
	if err != nil { // settings are validated with the config
		c.logger.Warn("dcgmreceiver: pod labels are off", zap.Error(err))
		return
	}
	w.Start()
	c.watcher.Store(w)
}

func (c *clusterPodLabels) Stop() {
	if w := c.watcher.Load(); w != nil {
		w.Stop()
	}
}

func (c *clusterPodLabels) Labels(namespace, name string) []podlabels.Label {
	if w := c.watcher.Load(); w != nil {
		return w.Labels(namespace, name)
	}
	return nil
}
