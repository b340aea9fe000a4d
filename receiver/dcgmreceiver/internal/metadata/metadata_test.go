package metadata

import (
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestType(t *testing.T) {
	if Type.String() != "dcgm" {
		t.Fatalf("Type = %q, want dcgm", Type)
	}
}

func TestTelemetryBuilder(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(t.Context()) }()
	b, err := NewTelemetryBuilder(tel.NewTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	b.DcgmCollectErrors.Add(t.Context(), 2)
	m, err := tel.GetMetric("otelcol_dcgm_collect_errors")
	if err != nil {
		t.Fatalf("otelcol_dcgm_collect_errors not recorded: %v", err)
	}
	if m.Name != "otelcol_dcgm_collect_errors" {
		t.Fatalf("got %q", m.Name)
	}
}
