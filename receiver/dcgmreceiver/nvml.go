package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"
)

// newNVMLSource reads GPUs through NVML (libnvidia-ml.so.1, loaded at Start).
func newNVMLSource(cfg *Config, logger *zap.Logger) (source.Metrics, error) {
	return nvmlsrc.New(nvml.New(), cfg.CallTimeout, logger), nil
}
