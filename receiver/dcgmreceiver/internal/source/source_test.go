package source_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/dcgmsrc"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/exportersrc"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Every backend implements the interface the receiver drives; a change of
// the interface that a backend misses fails here, not in a collector build.
func TestBackendsImplementTheInterfaces(t *testing.T) {
	backends := map[string]any{
		"dcgm":     (*dcgmsrc.Source)(nil),
		"nvml":     (*nvmlsrc.Source)(nil),
		"exporter": (*exportersrc.Source)(nil),
		"kmsg":     (*kmsg.Reader)(nil),
	}
	for name, b := range backends {
		_, isMetrics := b.(source.Metrics)
		_, isXIDs := b.(source.XIDs)
		_, isProcesses := b.(source.Processes)
		switch {
		case name == "kmsg" && !isXIDs:
			t.Errorf("%s is not an XIDs source", name)
		case name != "kmsg" && !isMetrics:
			t.Errorf("%s is not a metrics source", name)
		case name == "nvml" && !isProcesses:
			t.Errorf("nvml cannot list GPU processes for Slurm attribution")
		}
	}
}
