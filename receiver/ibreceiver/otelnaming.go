package ibreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"

// The series under naming: otel (hw.network.*, ib.port.* with host.name and
// ib.device on the resource): one ResourceMetrics per device, cumulative
// counters with their resets. naming: node_exporter is nodeexporter.go.

import (
	"context"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"
)

// metricsBuilder creates a device's metrics lazily, so that no metric
// without data points is emitted.
//
// Each metric's points are sized to the count of the device's previous
// scrape (sizes), as contrib's generated MetricsBuilders do: no slice grows
// point by point in a steady state.
type metricsBuilder struct {
	sm    pmetric.ScopeMetrics
	dps   [numMetrics]pmetric.NumberDataPointSlice
	has   [numMetrics]bool
	sizes *[numMetrics]int
}

func (b *metricsBuilder) point(id metricID) pmetric.NumberDataPoint {
	if !b.has[id] {
		def := &metricDefs[id]
		m := b.sm.Metrics().AppendEmpty()
		m.SetName(def.name)
		m.SetDescription(def.description)
		m.SetUnit(def.unit)
		if def.sum {
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			b.dps[id] = sum.DataPoints()
		} else {
			b.dps[id] = m.SetEmptyGauge().DataPoints()
		}
		b.dps[id].EnsureCapacity(b.sizes[id])
		b.has[id] = true
	}
	return b.dps[id].AppendEmpty()
}

// remember records the counts of this scrape's points for the next one.
func (b *metricsBuilder) remember() {
	for id := range b.dps {
		b.sizes[id] = 0
		if b.has[id] {
			b.sizes[id] = b.dps[id].Len()
		}
	}
}

func (s *ibScraper) emitDevice(ctx context.Context, rm pmetric.ResourceMetrics, ds *deviceState, now, resetStart pcommon.Timestamp) {
	dev := &ds.dev
	res := rm.Resource().Attributes()
	res.EnsureCapacity(2)
	if s.hostName != "" {
		res.PutStr(semconv.AttrHostName, s.hostName)
	}
	res.PutStr(semconv.AttrIBDevice, dev.Name)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	sm.Scope().SetVersion(s.version)
	sm.Metrics().EnsureCapacity(ds.metrics)
	b := &metricsBuilder{sm: sm, sizes: &ds.points}
	defer func() {
		b.remember()
		ds.metrics = sm.Metrics().Len()
	}()

	for _, err := range dev.Errs {
		s.fail(ctx, dev.Name, ds, failKey{name: "ports"}, err)
	}
	info := b.point(mDeviceInfo)
	info.SetTimestamp(now)
	info.SetIntValue(1)
	ia := info.Attributes()
	for _, t := range [...]struct {
		file, attr string
		v          *sysfs.Text
	}{
		{"hca_type", semconv.AttrIBHCAType, &dev.HCAType},
		{"board_id", semconv.AttrIBBoardID, &dev.BoardID},
		{"fw_ver", semconv.AttrIBFWVer, &dev.FWVer},
		{"node_guid", semconv.AttrIBNodeGUID, &dev.NodeGUID},
	} {
		if t.v.Err != nil {
			s.fail(ctx, dev.Name, ds, failKey{name: t.file}, t.v.Err)
		} else if t.v.Present {
			ia.PutStr(t.attr, t.v.Value)
		}
	}

	for i := range dev.Ports {
		s.emitPort(ctx, b, ds, &dev.Ports[i], now, resetStart)
	}

	for k, st := range ds.series {
		if st.gen != s.gen {
			delete(ds.series, k)
		}
	}
	for k, st := range ds.failing {
		if st.gen != s.gen {
			delete(ds.failing, k)
			s.logger.Info("ibreceiver: value readable again (or gone)",
				zap.String(semconv.AttrIBDevice, dev.Name), zap.String("file", k.rel()))
		}
	}
}

func (s *ibScraper) emitPort(ctx context.Context, b *metricsBuilder, ds *deviceState, p *sysfs.Port, now, resetStart pcommon.Timestamp) {
	dev := ds.dev.Name
	for _, err := range p.Errs {
		s.fail(ctx, dev, ds, failKey{port: p.Name, dir: "hw_counters"}, err)
	}

	s.emitState(ctx, b, ds, p, mPortState, "state", semconv.AttrIBState, &p.State, now)
	s.emitState(ctx, b, ds, p, mPortPhysState, "phys_state", semconv.AttrIBPhysState, &p.PhysState, now)

	if p.LinkLayer.Err != nil {
		s.fail(ctx, dev, ds, failKey{port: p.Name, name: "link_layer"}, p.LinkLayer.Err)
	}
	if p.Rate.Err != nil {
		s.fail(ctx, dev, ds, failKey{port: p.Name, name: "rate"}, p.Rate.Err)
	} else if p.Rate.Present {
		dp := b.point(mPortRate)
		dp.SetTimestamp(now)
		dp.SetIntValue(saturate(p.Rate.BytesPerSecond, 1))
		a := dp.Attributes()
		a.EnsureCapacity(2)
		a.PutStr(semconv.AttrIBPort, p.Name)
		if p.LinkLayer.Present {
			a.PutStr(semconv.AttrIBLinkLayer, p.LinkLayer.Value)
		}
	}

	for i := range p.Counters {
		c := &p.Counters[i]
		def, ok := counterDefs[c.Name]
		if !ok {
			continue
		}
		if c.Err != nil {
			s.fail(ctx, dev, ds, failKey{port: p.Name, dir: "counters", name: c.Name}, c.Err)
			continue
		}
		if def.ext != "" {
			if ext := findCounter(p.ExtCounters, def.ext); ext != nil && ext.Err == nil {
				continue // the 64-bit counter is emitted below
			}
		}
		s.emitSum(b, ds, p.Name, def, def.attrVal, c.Value, srcCounters, now, resetStart)
	}
	for i := range p.ExtCounters {
		c := &p.ExtCounters[i]
		def, ok := extCounterDefs[c.Name]
		if !ok {
			continue
		}
		if c.Err != nil {
			s.fail(ctx, dev, ds, failKey{port: p.Name, dir: "counters_ext", name: c.Name}, c.Err)
			continue
		}
		s.emitSum(b, ds, p.Name, def, def.attrVal, c.Value, srcCountersExt, now, resetStart)
	}
	hwDef := counterDef{metric: mHWCounter, attrKey: semconv.AttrIBHWCounter, scale: 1}
	for i := range p.HWCounters {
		c := &p.HWCounters[i]
		if c.Err != nil {
			s.fail(ctx, dev, ds, failKey{port: p.Name, dir: "hw_counters", name: c.Name}, c.Err)
			continue
		}
		s.emitSum(b, ds, p.Name, hwDef, c.Name, c.Value, srcHWCounters, now, resetStart)
	}
}

func (s *ibScraper) emitState(ctx context.Context, b *metricsBuilder, ds *deviceState, p *sysfs.Port, id metricID, file, attr string, st *sysfs.State, now pcommon.Timestamp) {
	if st.Err != nil {
		s.fail(ctx, ds.dev.Name, ds, failKey{port: p.Name, name: file}, st.Err)
		return
	}
	if !st.Present {
		return
	}
	dp := b.point(id)
	dp.SetTimestamp(now)
	dp.SetIntValue(st.Code)
	a := dp.Attributes()
	a.EnsureCapacity(2)
	a.PutStr(semconv.AttrIBPort, p.Name)
	a.PutStr(attr, st.Text)
}

// emitSum appends a cumulative data point. Any decrease of the raw value (a
// 32-bit counter wrapped, a saturated PMA counter was cleared, the driver
// reloaded) or a change of its source file is a reset: the series restarts
// at resetStart instead of reporting a negative delta.
func (s *ibScraper) emitSum(b *metricsBuilder, ds *deviceState, port string, def counterDef, attrVal string, raw uint64, source uint8, now, resetStart pcommon.Timestamp) {
	key := seriesKey{port: port, metric: def.metric, attr: attrVal}
	prev, ok := ds.series[key]
	start := resetStart
	if ok && raw >= prev.last && source == prev.source {
		start = prev.start
	}
	ds.series[key] = seriesState{last: raw, start: start, source: source, gen: s.gen}

	dp := b.point(def.metric)
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(now)
	dp.SetIntValue(saturate(raw, def.scale))
	a := dp.Attributes()
	a.EnsureCapacity(2)
	a.PutStr(semconv.AttrIBPort, port)
	if def.attrKey != "" {
		a.PutStr(def.attrKey, attrVal)
	}
}

// saturate returns raw*scale as an int64, clamped at math.MaxInt64: data
// points are signed, and a value that stops growing is read as a saturated
// counter rather than a negative one.
func saturate(raw, scale uint64) int64 {
	if scale == 0 || raw > uint64(math.MaxInt64)/scale {
		return math.MaxInt64
	}
	return int64(raw * scale)
}

func findCounter(cs []sysfs.Counter, name string) *sysfs.Counter {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}
