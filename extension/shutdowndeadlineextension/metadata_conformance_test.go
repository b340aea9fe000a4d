package shutdowndeadlineextension

import (
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
)

// metadata.yaml against the factory and the ocb manifests.
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{Factory: NewFactory()})
}
