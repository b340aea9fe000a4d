package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

var errConfigNotRepair = errors.New("gpurepair: config is not a *gpurepairreceiver.Config")

// factoryOptions are the seams tests (and the verify wiring) replace.
type factoryOptions struct {
	// devices returns the GPU seam for cfg (production: NVML and the
	// reset command).
	devices func(cfg *Config) Devices
	// runners returns the verification checks this agent can run
	// (production: productionRunners, runners.go).
	runners runnersFunc
	now     func() time.Time
	after   func(time.Duration) <-chan time.Time
	// beforeReset: tests only.
	beforeReset func()
}

// factoryOption changes the factory's options.
type factoryOption func(*factoryOptions)

// NewFactory creates the factory of the gpu_repair receiver.
func NewFactory() receiver.Factory { return newFactory() }

func newFactory(opts ...factoryOption) receiver.Factory {
	o := factoryOptions{
		devices: func(cfg *Config) Devices {
			return newNVMLDevices(nvml.New(), cfg.CallTimeout, &commandReset{argv: slices.Clone(cfg.GPUReset.Command), timeout: cfg.GPUReset.Timeout})
		},
		runners: productionRunners,
		now:     time.Now,
		after:   time.After,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithLogs(func(ctx context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
			return createLogs(ctx, set, cfg, next, o)
		}, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	sc := confighttp.NewDefaultServerConfig()
	sc.NetAddr.Endpoint = DefaultEndpoint
	sc.MaxRequestBodySize = repair.MaxRequestBytes
	diag, links := defaultVerifyChecks()
	return &Config{
		ServerConfig:   sc,
		MaxSkew:        repair.DefaultMaxSkew,
		ReplayCapacity: repair.DefaultReplayCapacity,
		ProcRoot:       "/proc",
		CallTimeout:    DefaultCallTimeout,
		SMActiveIdle:   DefaultSMActiveIdle,
		SMActiveMaxAge: DefaultSMActiveMaxAge,
		GPUReset:       ResetConfig{Command: slices.Clone(DefaultResetCommand), Timeout: DefaultResetTimeout},
		Verify: VerifyConfig{Timeout: DefaultVerifyTimeout, IdleWait: DefaultIdleWait, IdlePollInterval: DefaultIdlePollInterval,
			Diag: diag, Links: links},
		MaxJobs: DefaultMaxJobs,
	}
}

func createLogs(_ context.Context, set receiver.Settings, baseCfg component.Config, next consumer.Logs, o factoryOptions) (receiver.Logs, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errConfigNotRepair
	}
	return newReceiver(cfg, set, next, o)
}
