package ibreceiver

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestNodeExporterNamesTable(t *testing.T) {
	require.Len(t, nodeExporterCounters, 60, "node_exporter v1.12.1's counters of counters/, counters_ext/ and hw_counters/")
	seen := map[string]bool{}
	for _, c := range nodeExporterCounters {
		assert.False(t, seen[c.metric], "%s twice", c.metric)
		seen[c.metric] = true
		assert.NotEmpty(t, c.help, c.metric)
	}
	for name, row := range map[string]string{
		"five columns": "counters\tx\ty\tcounter\t1",
		"a bad type":   "counters\tx\ty\thistogram\t1\th",
		"a bad scale":  "counters\tx\ty\tcounter\t8\th",
	} {
		assert.Panics(t, func() { parseNodeExporterNames(row) }, name)
	}
}

// naming: node_exporter on procfs' tree gives node_exporter's values
// (checked against node_exporter itself in test/e2e): the data counters
// are 4-byte words, lifespan is whole seconds, every point has device and
// port and no resource attribute.
func TestNodeExporterNaming(t *testing.T) {
	cfg := testConfig(procfsRoot)
	cfg.Naming = NamingNodeExporter
	require.NoError(t, cfg.Validate())
	md := newTestEnv(t, cfg).scrape(t)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	assert.Zero(t, md.ResourceMetrics().At(0).Resource().Attributes().Len())
	values := map[string]float64{}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		var dps pmetric.NumberDataPointSlice
		if m.Type() == pmetric.MetricTypeGauge {
			dps = m.Gauge().DataPoints()
		} else {
			dps = m.Sum().DataPoints()
		}
		for j := 0; j < dps.Len(); j++ {
			a := dps.At(j).Attributes().AsRaw()
			values[fmt.Sprintf("%s/%v/%v", m.Name(), a["device"], a["port"])] = dps.At(j).DoubleValue()
		}
	}
	for key, want := range map[string]float64{
		"node_infiniband_port_data_received_bytes_total/mlx4_0/1":    8.884894436e+09,
		"node_infiniband_port_data_transmitted_bytes_total/mlx5_0/1": 1.1523046035392e+13,
		"node_infiniband_duplicate_requests_packets_total/mlx5_0/1":  41,
		"node_infiniband_lifespan_seconds/mlx5_0/1":                  0,
		"node_infiniband_physical_state_id/mlx5_0/1":                 4,
	} {
		assert.Equal(t, want, values[key], key)
	}
	assert.NotContains(t, values, "node_infiniband_duplicate_requests_packets_total/mlx4_0/1", "mlx4 has no hw_counters")

	bad := testConfig(procfsRoot)
	bad.Naming = "prometheus"
	assert.ErrorContains(t, bad.Validate(), `naming: "prometheus" is not one of otel, node_exporter`)
}
