package metadatatest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readFake(t *testing.T) *metadata {
	t.Helper()
	md, err := readMetadata(filepath.Join("testdata", "fake.yaml"))
	require.NoError(t, err)
	return md
}

func TestReadMetadata(t *testing.T) {
	md := readFake(t)
	assert.Equal(t, "fake", md.Type)
	assert.Equal(t, "receiver", md.Status.Class)
	assert.Equal(t, map[string][]string{"alpha": {"metrics"}, "development": {"logs"}}, md.Status.Stability)
	assert.Len(t, md.Metrics, 2)
	assert.Equal(t, "alpha", md.Telemetry.Metrics["fake_read_errors"].Stability.Level)
}

// A key given twice is an error, not a silent override: dcgm's
// metadata.yaml once documented gpu.clock.throttle twice.
func TestReadMetadataRefusesDuplicateKeys(t *testing.T) {
	_, err := readMetadata(filepath.Join("testdata", "duplicate.yaml"))
	require.ErrorContains(t, err, `"fake.metric" already defined`)
}

func TestReadMetadataMissingFile(t *testing.T) {
	_, err := readMetadata(filepath.Join("testdata", "absent.yaml"))
	require.Error(t, err)
}

func TestMetricDocKind(t *testing.T) {
	_, _, err := metricDoc{}.kind()
	require.ErrorContains(t, err, "exactly one of gauge, sum, histogram")
	_, _, err = metricDoc{Gauge: &dataDoc{}, Sum: &dataDoc{}}.kind()
	require.ErrorContains(t, err, "[Gauge Sum]")
	kind, _, err := metricDoc{Histogram: &dataDoc{}}.kind()
	require.NoError(t, err)
	assert.Equal(t, "Histogram", kind)
}
