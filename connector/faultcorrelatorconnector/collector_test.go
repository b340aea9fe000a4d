package faultcorrelatorconnector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// runCollector runs a collector with nop receivers and exporters and this
// connector on cfg until it is running (then shuts it down) or fails.
func runCollector(t *testing.T, cfg string) error {
	t.Helper()
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: func() (otelcol.Factories, error) {
			f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
			var errs [3]error
			f.Receivers, errs[0] = otelcol.MakeFactoryMap[receiver.Factory](receivertest.NewNopFactory())
			f.Exporters, errs[1] = otelcol.MakeFactoryMap[exporter.Factory](exportertest.NewNopFactory())
			f.Connectors, errs[2] = otelcol.MakeFactoryMap[connector.Factory](NewFactory())
			for _, err := range errs {
				if err != nil {
					return f, err
				}
			}
			return f, nil
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs:              []string{"yaml:" + cfg},
				ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
			},
		},
		SkipSettingGRPCLogger: true,
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- col.Run(context.Background()) }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if col.GetState() == otelcol.StateRunning {
			col.Shutdown()
			return <-done
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const collectorConfig = `
receivers: {nop: {}}
exporters: {nop: {}}
connectors:
  faultcorrelator:
    mode: %s
service:
  telemetry: {metrics: {level: none}, logs: {level: error}}
  pipelines:
    traces: {receivers: [nop], exporters: [faultcorrelator]}
    metrics: {receivers: [nop], exporters: [faultcorrelator]}
    logs/faults: {receivers: [faultcorrelator], exporters: [nop]}
`

// The agent-mode correlator wired into a traces pipeline, as a user would
// write it: the collector refuses to start and says what to change, instead
// of dropping every span without a word.
func TestCollectorRefusesAgentModeInTracesPipeline(t *testing.T) {
	err := runCollector(t, fmt.Sprintf(collectorConfig, ModeAgent))
	require.Error(t, err)
	require.ErrorIs(t, err, errTracesNeedGateway)
	assert.ErrorContains(t, err, `faultcorrelator: mode "agent" ignores spans`)
	assert.ErrorContains(t, err, "set mode: gateway")

	// The same pipelines in gateway mode start.
	require.NoError(t, runCollector(t, fmt.Sprintf(collectorConfig, ModeGateway)))
}
