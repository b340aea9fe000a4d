package provenanceprocessor

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"gopkg.in/yaml.v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

// metadata.yaml against the factory, the ocb manifests and the telemetry
// builder.
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{
		Factory: NewFactory(),
		Telemetry: func(t *testing.T, set component.TelemetrySettings) {
			tb, err := metadata.NewTelemetryBuilder(set)
			require.NoError(t, err)
			metadatatest.RecordAll(t, tb)
		},
	})
}

// Every reason the processor counts is documented in metadata.yaml, and
// the canonical-form reasons are spelled as internal/otlpmap names its
// kinds.
func TestMetadataDocumentsEveryReason(t *testing.T) {
	raw, err := os.ReadFile("metadata.yaml")
	require.NoError(t, err)
	var md struct {
		Telemetry struct {
			Metrics map[string]struct {
				Extended string `yaml:"extended_documentation"`
			} `yaml:"metrics"`
		} `yaml:"telemetry"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &md))
	doc := md.Telemetry.Metrics["processor_provenance_rejected_claims"].Extended
	var all []string
	all = append(all, reasonNames[:]...)
	all = append(all, metadata.ReasonNoCredential)
	for k, name := range canonicalReasonNames {
		if otlpmap.Kind(k) == otlpmap.Canonical {
			assert.Empty(t, name, "nothing is counted for a canonical map")
			continue
		}
		assert.Equal(t, otlpmap.Kind(k).String(), name)
		all = append(all, name)
	}
	for _, name := range all {
		assert.Contains(t, doc, name, "metadata.yaml's extended_documentation of rejected_claims names reason %s", name)
	}
}
