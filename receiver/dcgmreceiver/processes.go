package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"context"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"
)

// processSource picks how the receiver learns each GPU's processes for
// Slurm attribution: from the metrics source when it can list them (NVML),
// else from NVML beside it (DCGM and dcgm-exporter do not list processes
// per GPU; the driver's NVML is on every GPU node).
func processSource(cfg *Config, metrics source.Metrics, logger *zap.Logger) source.Processes {
	if !cfg.Attribution.Slurm.Enabled {
		return nil
	}
	if p, ok := metrics.(source.Processes); ok {
		return p
	}
	return &processLister{src: nvmlsrc.New(nvml.New(), cfg.CallTimeout, logger), logger: logger}
}

// processLister starts its NVML source on first use and again after a
// failure, so a node whose driver is not loaded yet gets attribution later.
type processLister struct {
	src    *nvmlsrc.Source
	logger *zap.Logger

	mu      sync.Mutex
	started bool
	failing bool
}

func (l *processLister) Processes(ctx context.Context) (map[string][]int, error) {
	l.mu.Lock()
	if !l.started {
		if err := l.src.Start(ctx, nil); err != nil {
			if !l.failing {
				l.logger.Warn("dcgmreceiver: NVML unavailable, Slurm jobs are found from the job-mapping directory only", zap.Error(err))
				l.failing = true
			}
			l.mu.Unlock()
			return nil, err
		}
		l.started, l.failing = true, false
	}
	l.mu.Unlock()
	return l.src.Processes(ctx)
}

func (l *processLister) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		return nil
	}
	l.started = false
	return l.src.Shutdown(ctx)
}
