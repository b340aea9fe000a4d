package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/dcgmsrc"
)

// connections is the process's DCGM connection registry: go-dcgm keeps one
// handle per process, so every receiver instance shares it.
type connections = dcgmsrc.Connections

func newConnections() *connections { return dcgmsrc.NewConnections() }

func (f *factory) newDCGMSource(cfg *Config, logger *zap.Logger) (source.Metrics, error) {
	mode := dcgmsrc.ModeStandalone
	if cfg.Mode == ModeEmbedded {
		mode = dcgmsrc.ModeEmbedded
	}
	return dcgmsrc.New(f.conns, dcgmsrc.Config{
		Mode:               mode,
		Endpoint:           cfg.Endpoint,
		CollectionInterval: cfg.CollectionInterval,
		ProfilingInterval:  cfg.ProfilingInterval,
		CallTimeout:        cfg.CallTimeout,
	}, logger), nil
}
