package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/testhook"
)

// The test-support package gpurepairtest builds the real receiver with a
// fake GPU seam through internal/testhook: everything else (signatures,
// confirm, the diag runners, the jobs) is the production code.
func init() {
	testhook.NewFactory = func(devices any) receiver.Factory {
		d, ok := devices.(Devices)
		if !ok || d == nil {
			return nil
		}
		return newFactory(func(o *factoryOptions) { o.devices = func(*Config) Devices { return d } })
	}
}
