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
	var metrics = map[string]source.Metrics{
		"dcgm":     (*dcgmsrc.Source)(nil),
		"nvml":     (*nvmlsrc.Source)(nil),
		"exporter": (*exportersrc.Source)(nil),
	}
	if len(metrics) != 3 {
		t.Fatal("three metrics sources expected")
	}
	var xids source.XIDs = (*kmsg.Reader)(nil)
	if xids == nil {
		t.Fatal("kmsg reader is not an XIDs source")
	}
}
