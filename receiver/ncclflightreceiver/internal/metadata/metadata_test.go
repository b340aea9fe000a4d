package metadata

import (
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestTelemetryBuilder(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(t.Context()) }()
	b, err := NewTelemetryBuilder(tel.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	b.NcclflightBadInputs.Add(t.Context(), 1)
	if _, err := tel.GetMetric("otelcol_ncclflight_bad_inputs"); err != nil {
		t.Fatal(err)
	}
	if Type.String() != "ncclflight" {
		t.Fatalf("Type = %s", Type)
	}
}
