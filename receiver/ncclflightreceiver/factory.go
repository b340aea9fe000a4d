package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

var errConfigNotNCCL = errors.New("ncclflightreceiver: config is not a *ncclflightreceiver.Config")

// Defaults (README.md of this receiver).
const (
	defaultRescanInterval  = 10 * time.Second
	defaultSettleTime      = time.Second
	defaultMaxFileSize     = frdump.DefaultMaxJSONBytes // the larger form's cap: a bigger file is never read
	defaultIncompleteAfter = 2 * time.Minute
	defaultStallAfter      = time.Minute // analysis.DefaultOptions().StallAfter
	defaultInspectorPoll   = time.Second
	defaultRASInterval     = 30 * time.Second
	defaultRASTimeout      = 15 * time.Second
)

// NewFactory creates the factory of the ncclflight receiver. One config's
// traces, metrics and logs pipelines share one receiver.
func NewFactory() receiver.Factory {
	f := &factory{shared: sharedcomponent.NewMap[*Config, *ncclReceiver]()}
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithTraces(f.createTraces, metadata.TracesStability),
		receiver.WithMetrics(f.createMetrics, metadata.MetricsStability),
		receiver.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		FlightRecorder: FlightRecorderConfig{
			// The leading * admits the host-name prefix users give dumps.
			Patterns:        []string{"*nccl_trace_rank_*", "*comm_lib_trace_rank_*", "*_dump_*"},
			JobPath:         defaultJobPath,
			Rank:            -1,
			RescanInterval:  defaultRescanInterval,
			SettleTime:      defaultSettleTime,
			MaxFileSize:     defaultMaxFileSize,
			IncompleteAfter: defaultIncompleteAfter,
			StallAfter:      defaultStallAfter,
		},
		Inspector: InspectorConfig{PollInterval: defaultInspectorPoll},
		RAS:       RASConfig{Interval: defaultRASInterval, Timeout: defaultRASTimeout},
	}
}

type factory struct {
	shared *sharedcomponent.Map[*Config, *ncclReceiver]
}

// connect returns the one receiver of a config, whichever pipelines use it,
// with the calling pipeline's consumer connected.
func (f *factory) connect(set receiver.Settings, cfg component.Config, to func(*ncclReceiver)) (component.Component, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotNCCL
	}
	return f.shared.Connect(c, func() (*ncclReceiver, error) { return newNCCLReceiver(c, set) }, to)
}

func (f *factory) createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	return f.connect(set, cfg, func(r *ncclReceiver) { r.nextTraces = next })
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return f.connect(set, cfg, func(r *ncclReceiver) { r.nextMetrics = next })
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return f.connect(set, cfg, func(r *ncclReceiver) { r.nextLogs = next })
}
