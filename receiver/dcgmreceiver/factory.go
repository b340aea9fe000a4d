package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
)

var errConfigNotDCGM = errors.New("dcgmreceiver: config is not a *dcgmreceiver.Config")

// Defaults (docs: README.md of this receiver).
const (
	defaultEndpoint           = "localhost:5555"
	defaultKMsgPath           = "/dev/kmsg"
	defaultCollectionInterval = 10 * time.Second
	defaultProfilingInterval  = 30 * time.Second
	defaultCallTimeout        = 5 * time.Second
	defaultRefreshInterval    = 30 * time.Second
	defaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	defaultProcRoot           = "/proc"
)

// NewFactory creates the factory of the dcgm receiver. The factory owns
// what must exist once per process: the receivers shared by a config's
// metrics and logs pipelines, and the DCGM connections.
func NewFactory() receiver.Factory {
	f := &factory{shared: sharedcomponent.NewMap[*Config, *dcgmReceiver](), conns: newConnections()}
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(f.createMetrics, metadata.MetricsStability),
		receiver.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		Source:             SourceDCGM,
		Mode:               ModeStandalone,
		Endpoint:           defaultEndpoint,
		KMsgPath:           defaultKMsgPath,
		Naming:             NamingOTel,
		CollectionInterval: defaultCollectionInterval,
		ProfilingInterval:  defaultProfilingInterval,
		CallTimeout:        defaultCallTimeout,
		Attribution: AttributionConfig{
			RefreshInterval: defaultRefreshInterval,
			Kubernetes:      KubernetesAttributionConfig{Socket: defaultPodResourcesSocket},
			Slurm:           SlurmAttributionConfig{ProcRoot: defaultProcRoot},
		},
	}
}

type factory struct {
	shared *sharedcomponent.Map[*Config, *dcgmReceiver]
	conns  *connections
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return f.connect(set, cfg, func(r *dcgmReceiver) { r.nextMetrics = next })
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return f.connect(set, cfg, func(r *dcgmReceiver) { r.nextLogs = next })
}

// connect returns the one receiver of a config, whichever pipelines use it,
// with the calling pipeline's consumer connected.
func (f *factory) connect(set receiver.Settings, cfg component.Config, to func(*dcgmReceiver)) (component.Component, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotDCGM
	}
	return f.shared.Connect(c, func() (*dcgmReceiver, error) {
		deps, err := f.dependencies(c, set)
		if err != nil {
			return nil, err
		}
		return newDCGMReceiver(c, set, deps)
	}, to)
}
