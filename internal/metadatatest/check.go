package metadatatest // import "github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Component is what a component's conformance test hands to Check.
type Component struct {
	// Factory is the component's factory: its type and stability levels.
	Factory component.Factory
	// Metrics returns what the component emits, covering every metric it
	// can emit. Nil for a component that emits no metrics of its own.
	Metrics func(t *testing.T) []pmetric.Metrics
	// Telemetry creates the component's own instruments on settings and
	// records each once (RecordAll). Nil for a component without any.
	Telemetry func(t *testing.T, settings component.TelemetrySettings)
}

// Check compares ./metadata.yaml with c, one subtest per side of it; each
// difference is one error naming the metadata.yaml key and both values.
func Check(t *testing.T, c Component) {
	t.Helper()
	md, err := readMetadata("metadata.yaml")
	require.NoError(t, err)
	report := func(t *testing.T, ps problems) {
		for _, p := range ps {
			t.Error(p)
		}
	}
	t.Run("type", func(t *testing.T) {
		var ps problems
		ps.compare("type", "", md.Type, c.Factory.Type().String())
		report(t, ps)
	})
	t.Run("stability", func(t *testing.T) { report(t, checkStability(md, c.Factory)) })
	t.Run("distributions", func(t *testing.T) {
		root, module, err := findModule()
		require.NoError(t, err)
		wd, err := os.Getwd()
		require.NoError(t, err)
		rel, err := filepath.Rel(root, wd)
		require.NoError(t, err)
		manifests, err := readManifests(root)
		require.NoError(t, err)
		report(t, checkDistributions(md, module+"/"+filepath.ToSlash(rel), manifests))
	})
	t.Run("metrics", func(t *testing.T) {
		var got []pmetric.Metrics
		if c.Metrics != nil {
			got = c.Metrics(t)
		}
		report(t, checkMetrics(md, got))
	})
	t.Run("telemetry", func(t *testing.T) {
		report(t, checkTelemetry(md, registered(t, c.Telemetry)))
	})
}

// problems collects the differences a check finds.
type problems []string

func (p *problems) addf(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// compare records a difference of one field between metadata.yaml (key,
// field) and the code.
func (p *problems) compare(key, field string, documented, actual any) {
	if documented == actual {
		return
	}
	if field != "" {
		key += " " + field
	}
	p.addf("%s: metadata.yaml has %#v, the code %#v", key, documented, actual)
}
