package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/attribution"
)

// newAttributor returns nil when no attribution source is enabled.
func newAttributor(cfg *Config, logger *zap.Logger) (attributor, error) {
	a := cfg.Attribution
	if !a.Kubernetes.Enabled && !a.Slurm.Enabled {
		return nil, nil
	}
	s := attribution.Settings{
		Kubelet:          a.Kubernetes.Enabled,
		KubeletSocket:    a.Kubernetes.Socket,
		SlurmProcesses:   a.Slurm.Enabled,
		ProcRoot:         a.Slurm.ProcRoot,
		HPCJobMapping:    a.Slurm.Enabled && a.Slurm.JobMappingDir != "",
		HPCJobMappingDir: a.Slurm.JobMappingDir,
		RefreshInterval:  a.RefreshInterval,
		Timeout:          cfg.CallTimeout,
	}
	at, err := attribution.New(s, logger)
	if err != nil {
		return nil, err
	}
	return at, nil
}
