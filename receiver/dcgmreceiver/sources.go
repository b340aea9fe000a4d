package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/exportersrc"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg"
)

// dependencies builds the sources a config names. Nothing here touches the
// hardware: connecting happens in the receiver's loop, with retries.
func (f *factory) dependencies(cfg *Config, set receiver.Settings) (dependencies, error) {
	var deps dependencies
	var err error
	logger := set.Logger
	switch cfg.Source {
	case SourceExporter:
		deps.metricsSource = exportersrc.New(cfg.Endpoint, cfg.CallTimeout, hostName(cfg, logger), logger)
	case SourceNVML:
		deps.metricsSource, err = newNVMLSource(cfg, logger)
	default:
		deps.metricsSource, err = f.newDCGMSource(cfg, logger)
	}
	if err != nil {
		return deps, err
	}
	if cfg.KMsg {
		deps.xidSources = append(deps.xidSources, kmsg.New(logger, kmsg.Options{Path: cfg.KMsgPath}))
	}
	deps.podLabels = newPodLabeler(cfg, logger)
	deps.attributor, err = newAttributor(cfg, logger)
	if deps.attributor != nil {
		deps.processes = processSource(cfg, deps.metricsSource, logger)
	}
	return deps, err
}

var _ source.XIDs = (*kmsg.Reader)(nil)
