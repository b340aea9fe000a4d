package metadatatest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/receiver"
)

var fakeType = component.MustNewType("fake")

func noConfig() component.Config { return struct{}{} }

func fakeReceiverFactory(metrics, logs component.StabilityLevel) receiver.Factory {
	create := func(context.Context, receiver.Settings, component.Config, consumer.Metrics) (receiver.Metrics, error) {
		return nil, nil
	}
	createLogs := func(context.Context, receiver.Settings, component.Config, consumer.Logs) (receiver.Logs, error) {
		return nil, nil
	}
	return receiver.NewFactory(fakeType, noConfig,
		receiver.WithMetrics(create, metrics), receiver.WithLogs(createLogs, logs))
}

func TestCheckStability(t *testing.T) {
	md := readFake(t)
	assert.Empty(t, checkStability(md, fakeReceiverFactory(component.StabilityLevelAlpha, component.StabilityLevelDevelopment)))
	assert.Equal(t, problems{
		`status.stability of logs: metadata.yaml has "development", the factory's LogsStability "beta" ("": not supported)`,
		`status.stability of metrics: metadata.yaml has "alpha", the factory's MetricsStability "development" ("": not supported)`,
	}, checkStability(md, fakeReceiverFactory(component.StabilityLevelDevelopment, component.StabilityLevelBeta)))
}

func TestCheckStabilityUnsupportedSignal(t *testing.T) {
	md := readFake(t)
	md.Status.Stability["alpha"] = append(md.Status.Stability["alpha"], "traces", "profiles")
	assert.Equal(t, problems{
		`status.stability of traces: metadata.yaml has "alpha", the factory's TracesStability "" ("": not supported)`,
		`status.stability.alpha lists "profiles", not a receiver signal`,
	}, checkStability(md, fakeReceiverFactory(component.StabilityLevelAlpha, component.StabilityLevelDevelopment)))
}

func TestCheckStabilityConnectorAndExtension(t *testing.T) {
	conn := connector.NewFactory(fakeType, noConfig, connector.WithTracesToLogs(
		func(context.Context, connector.Settings, component.Config, consumer.Logs) (connector.Traces, error) {
			return nil, nil
		}, component.StabilityLevelDevelopment))
	md := &metadata{}
	md.Status.Class = "connector"
	md.Status.Stability = map[string][]string{"development": {"traces_to_logs"}}
	assert.Empty(t, checkStability(md, conn))

	ext := extension.NewFactory(fakeType, noConfig,
		func(context.Context, extension.Settings, component.Config) (extension.Extension, error) {
			return nil, nil
		},
		component.StabilityLevelAlpha)
	md.Status.Class = "extension"
	md.Status.Stability = map[string][]string{"alpha": {"extension"}}
	assert.Empty(t, checkStability(md, ext))

	// A class whose methods the factory lacks says so instead of panicking.
	md.Status.Class = "connector"
	assert.Contains(t, checkStability(md, ext), `the factory has no LogsToLogsStability: is status.class "connector" right?`)
}

func TestCheckStabilityUnknownClass(t *testing.T) {
	md := &metadata{}
	md.Status.Class = "scraper"
	assert.Len(t, checkStability(md, fakeReceiverFactory(component.StabilityLevelAlpha, component.StabilityLevelAlpha)), 1)
}
