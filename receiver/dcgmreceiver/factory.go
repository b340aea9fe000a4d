package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

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
	f := &factory{shared: map[*Config]*sharedReceiver{}, conns: newConnections()}
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
	mu     sync.Mutex
	shared map[*Config]*sharedReceiver
	conns  *connections
}

// sharedReceiver is one receiver for a config, whichever pipelines use it:
// started once, stopped when the last pipeline stops.
type sharedReceiver struct {
	f       *factory
	cfg     *Config
	r       *dcgmReceiver
	refs    int
	started int
}

func (f *factory) get(set receiver.Settings, cfg *Config) (*sharedReceiver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.shared[cfg]; ok {
		s.refs++
		return s, nil
	}
	deps, err := f.dependencies(cfg, set)
	if err != nil {
		return nil, err
	}
	r, err := newDCGMReceiver(cfg, set, deps)
	if err != nil {
		return nil, err
	}
	s := &sharedReceiver{f: f, cfg: cfg, r: r, refs: 1}
	f.shared[cfg] = s
	return s, nil
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	s, err := f.getConfig(set, cfg)
	if err != nil {
		return nil, err
	}
	s.r.nextMetrics = next
	return s, nil
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	s, err := f.getConfig(set, cfg)
	if err != nil {
		return nil, err
	}
	s.r.nextLogs = next
	return s, nil
}

func (f *factory) getConfig(set receiver.Settings, cfg component.Config) (*sharedReceiver, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotDCGM
	}
	return f.get(set, c)
}

// Start starts the receiver the first time any of its pipelines starts.
func (s *sharedReceiver) Start(ctx context.Context, host component.Host) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.started++
	if s.started > 1 {
		return nil
	}
	return s.r.Start(ctx, host)
}

// Shutdown stops the receiver when its last pipeline stops.
func (s *sharedReceiver) Shutdown(ctx context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return nil
	}
	delete(s.f.shared, s.cfg)
	if s.started == 0 {
		return nil
	}
	return s.r.Shutdown(ctx)
}
