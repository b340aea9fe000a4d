package ibreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"

import (
	_ "embed"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"
)

// Under naming: node_exporter the receiver emits what node_exporter's
// infiniband collector exposes for the same sysfs tree (issue 31: a
// platform team replaces node_exporter's InfiniBand collector without
// touching its dashboards): the names, help texts, types, the labels
// device and port, and the values (data counters times 4, lifespan in
// whole seconds). TestNodeExporterNamingMatchesNodeExporter runs
// node_exporter itself on the test trees and compares series by series.

const (
	nodeExporterPrefix = "node_infiniband_"
	labelDevice        = "device"
	labelPort          = "port"
)

//go:embed node_exporter_names.tsv
var nodeExporterNamesTSV string

// nodeExporterCounter is one row of node_exporter_names.tsv.
type nodeExporterCounter struct {
	dir, file, metric, help string
	gauge                   bool
	scale                   string // "1", "4" or "ms_to_s"
}

var nodeExporterCounters = parseNodeExporterNames(nodeExporterNamesTSV)

// parseNodeExporterNames reads the embedded table; a malformed row is a
// build defect (TestNodeExporterNamesTable), so it panics.
func parseNodeExporterNames(tsv string) []nodeExporterCounter {
	var out []nodeExporterCounter
	for line := range strings.Lines(tsv) {
		line = strings.TrimRight(line, "\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 || (f[3] != "counter" && f[3] != "gauge") || (f[4] != "1" && f[4] != "4" && f[4] != "ms_to_s") {
			panic("ibreceiver: node_exporter_names.tsv: malformed row " + strconv.Quote(line))
		}
		out = append(out, nodeExporterCounter{dir: f[0], file: f[1], metric: f[2], gauge: f[3] == "gauge", scale: f[4], help: f[5]})
	}
	return out
}

// nodeExporterReadOptions reads every file the table names.
func nodeExporterReadOptions() sysfs.ReadOptions {
	var o sysfs.ReadOptions
	o.Counters, o.ExtCounters, o.HWCounters = []string{}, []string{}, []string{}
	for _, c := range nodeExporterCounters {
		switch c.dir {
		case "counters":
			o.Counters = append(o.Counters, c.file)
		case "counters_ext":
			o.ExtCounters = append(o.ExtCounters, c.file)
		case "hw_counters":
			o.HWCounters = append(o.HWCounters, c.file)
		}
	}
	return o
}

// Help texts of the series node_exporter builds in code.
const (
	helpInfo      = "Non-numeric data from /sys/class/infiniband/<device>, value is always 1."
	helpState     = "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)"
	helpPhysState = "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)"
	helpRate      = "Maximum signal transfer rate"
)

// nodeExporterMetrics builds the series of one scrape, a metric per name
// (node_exporter's families), in the resource rm without attributes: the
// page's labels are the points' own.
type nodeExporterMetrics struct {
	ms     pmetric.MetricSlice
	byName map[string]pmetric.NumberDataPointSlice
	now    pcommon.Timestamp
	start  pcommon.Timestamp
}

func (b *nodeExporterMetrics) point(name, help string, gauge bool) pmetric.NumberDataPoint {
	dps, ok := b.byName[name]
	if !ok {
		m := b.ms.AppendEmpty()
		m.SetName(nodeExporterPrefix + name)
		m.SetDescription(help)
		if gauge {
			dps = m.SetEmptyGauge().DataPoints()
		} else {
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dps = sum.DataPoints()
		}
		b.byName[name] = dps
	}
	dp := dps.AppendEmpty()
	dp.SetTimestamp(b.now)
	if !gauge {
		dp.SetStartTimestamp(b.start)
	}
	return dp
}

func (b *nodeExporterMetrics) portPoint(name, help string, gauge bool, device, port string, v float64) {
	dp := b.point(name, help, gauge)
	dp.SetDoubleValue(v)
	dp.Attributes().PutStr(labelDevice, device)
	dp.Attributes().PutStr(labelPort, port)
}

// newNodeExporterMetrics starts the scrape's resource.
func (s *ibScraper) newNodeExporterMetrics(md pmetric.Metrics, now pcommon.Timestamp) *nodeExporterMetrics {
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	sm.Scope().SetVersion(s.version)
	return &nodeExporterMetrics{ms: sm.Metrics(), byName: map[string]pmetric.NumberDataPointSlice{}, now: now, start: s.startTime}
}

// emitNodeExporter writes one device's series. What node_exporter leaves
// out is left out: a counter whose file is missing or unreadable ("N/A (no
// PMA)"), a state or rate that does not parse. Read errors are logged and
// counted as under otel naming.
func (s *ibScraper) emitNodeExporter(b *nodeExporterMetrics, ds *deviceState) {
	dev := &ds.dev
	info := b.point("info", helpInfo, true)
	info.SetDoubleValue(1)
	ia := info.Attributes()
	ia.PutStr(labelDevice, dev.Name)
	ia.PutStr("board_id", dev.BoardID.Value)
	ia.PutStr("firmware_version", dev.FWVer.Value)
	ia.PutStr("hca_type", dev.HCAType.Value)

	for i := range dev.Ports {
		p := &dev.Ports[i]
		port, err := strconv.ParseUint(p.Name, 10, 32)
		if err != nil {
			continue // node_exporter refuses a port directory that is not a number
		}
		portLabel := strconv.FormatUint(port, 10)
		if p.State.Present {
			b.portPoint("state_id", helpState, true, dev.Name, portLabel, float64(p.State.Code))
		}
		if p.PhysState.Present {
			b.portPoint("physical_state_id", helpPhysState, true, dev.Name, portLabel, float64(p.PhysState.Code))
		}
		if p.Rate.Present {
			b.portPoint("rate_bytes_per_second", helpRate, true, dev.Name, portLabel, float64(p.Rate.BytesPerSecond))
		}
		for _, c := range nodeExporterCounters {
			var files []sysfs.Counter
			switch c.dir {
			case "counters":
				files = p.Counters
			case "counters_ext":
				files = p.ExtCounters
			default:
				files = p.HWCounters
			}
			f := findCounter(files, c.file)
			if f == nil || f.Err != nil {
				continue
			}
			v := f.Value
			switch c.scale {
			case "4":
				v *= 4 // wraps as node_exporter's uint64 does
			case "ms_to_s":
				v /= 1000
			}
			b.portPoint(c.metric, c.help, c.gauge, dev.Name, portLabel, float64(v))
		}
	}
}
