package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"

import (
	"context"
	"errors"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

// NewFactory returns the factory of the gpu_faults receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type, createDefaultConfig,
		receiver.WithLogs(createLogsReceiver, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	client := configkafka.NewDefaultClientConfig()
	client.ClientID = "otelcol-gpu-remediation"
	return &Config{
		ClientConfig:      client,
		Topic:             semconv.TopicFaults,
		GroupID:           semconv.GroupRemediation,
		SessionTimeout:    10 * time.Second,
		HeartbeatInterval: time.Second,
		InitialOffset:     configkafka.EarliestOffset,
		RetryBackoff:      RetryBackoff{InitialInterval: 100 * time.Millisecond, MaxInterval: 10 * time.Second},
	}
}

var errConfigNotGPUFaults = errors.New("gpufaultsreceiver: config is not a *gpufaultsreceiver.Config")

func createLogsReceiver(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotGPUFaults
	}
	return newReceiver(c, set, next)
}
