package nodestateprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"

import (
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// maxReadingsPerSource bounds the distinct timestamps gathered for one GPU
// or port in one batch (a receiver sends one or two); points beyond it are
// not recorded, so a garbage batch cannot grow the work without bound.
const maxReadingsPerSource = 16

var nvlinkCounters = map[string]nodestate.GPUCounter{
	semconv.NVLinkErrorCRCFlit:  nodestate.NVLinkCRCFlitErrors,
	semconv.NVLinkErrorCRCData:  nodestate.NVLinkCRCDataErrors,
	semconv.NVLinkErrorReplay:   nodestate.NVLinkReplayErrors,
	semconv.NVLinkErrorRecovery: nodestate.NVLinkRecoveryErrors,
}

var eccCounters = map[string]nodestate.GPUCounter{
	semconv.ECCTypeSBEVolatile:  nodestate.ECCSBEVolatile,
	semconv.ECCTypeDBEVolatile:  nodestate.ECCDBEVolatile,
	semconv.ECCTypeSBEAggregate: nodestate.ECCSBEAggregate,
	semconv.ECCTypeDBEAggregate: nodestate.ECCDBEAggregate,
}

var ibCounters = map[string]nodestate.IBCounter{
	"symbol_error":        nodestate.IBSymbolErrors,
	"link_downed":         nodestate.IBLinkDowned,
	"link_error_recovery": nodestate.IBLinkErrorRecovery,
	"port_rcv_errors":     nodestate.IBPortRcvErrors,
}

// recordMetrics records every GPU resource (gpu.uuid) and InfiniBand
// resource (ib.device) of md.
func recordMetrics(store nodestate.Store, md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := rm.Resource().Attributes()
		if uuid := stringAttr(res, semconv.AttrGPUUUID); uuid != "" {
			recordGPU(store, uuid, rm.ScopeMetrics())
		} else if device := stringAttr(res, semconv.AttrIBDevice); device != "" {
			recordIB(store, device, rm.ScopeMetrics())
		}
	}
}

// gpuReading gathers the points of one GPU that share a timestamp into one
// sample (device fields and profiling fields may be read at different times).
type gpuReading struct {
	ts     pcommon.Timestamp
	sample nodestate.GPUSample
}

type gpuReadings []gpuReading

func (r *gpuReadings) at(ts pcommon.Timestamp) *nodestate.GPUSample {
	for i := range *r {
		if (*r)[i].ts == ts {
			return &(*r)[i].sample
		}
	}
	if len(*r) >= maxReadingsPerSource {
		return nil
	}
	*r = append(*r, gpuReading{ts: ts})
	return &(*r)[len(*r)-1].sample
}

func (r *gpuReadings) of(dp pmetric.NumberDataPoint) *nodestate.GPUSample {
	return r.at(dp.Timestamp())
}

func recordGPU(store nodestate.Store, uuid string, sms pmetric.ScopeMetricsSlice) {
	var storage [2]gpuReading
	readings := gpuReadings(storage[:0])
	eachMetric(sms, func(m pmetric.Metric) {
		switch m.Name() {
		case semconv.MetricGPUProfActive:
			eachGauge(m, func(dp pmetric.NumberDataPoint, s *nodestate.GPUSample) {
				if stringAttr(dp.Attributes(), semconv.AttrGPUProfUnit) == semconv.ProfUnitSM {
					s.SMActive = nodestate.Gauge{Value: pointValue(dp), Valid: true}
				}
			}, &readings)
		case semconv.MetricHWTemperature:
			eachGauge(m, func(dp pmetric.NumberDataPoint, s *nodestate.GPUSample) {
				if stringAttr(dp.Attributes(), semconv.AttrHWSensorLocation) == semconv.SensorLocationGPU {
					s.TemperatureC = nodestate.Gauge{Value: pointValue(dp), Valid: true}
				}
			}, &readings)
		case semconv.MetricGPUClockThrottle:
			eachGauge(m, func(dp pmetric.NumberDataPoint, s *nodestate.GPUSample) {
				reason := stringAttr(dp.Attributes(), semconv.AttrGPUThrottleReason)
				if reason == "" {
					return
				}
				s.ThrottleValid = true
				if v := pointValue(dp); v != 0 && !math.IsNaN(v) {
					s.ThrottleReasons = append(s.ThrottleReasons, reason)
				}
			}, &readings)
		case semconv.MetricGPUNVLinkErrors:
			eachCounter(m, func(dp pmetric.NumberDataPoint, c nodestate.Counter, s *nodestate.GPUSample) {
				if k, ok := nvlinkCounters[stringAttr(dp.Attributes(), semconv.AttrErrorType)]; ok {
					s.Counters[k] = c
				}
			}, readings.of)
		case semconv.MetricGPUECCErrors:
			eachCounter(m, func(dp pmetric.NumberDataPoint, c nodestate.Counter, s *nodestate.GPUSample) {
				if k, ok := eccCounters[stringAttr(dp.Attributes(), semconv.AttrGPUECCType)]; ok {
					s.Counters[k] = c
				}
			}, readings.of)
		case semconv.MetricGPUXIDErrors:
			eachCounter(m, func(dp pmetric.NumberDataPoint, c nodestate.Counter, s *nodestate.GPUSample) {
				s.XIDCountersComplete = true
				if code, ok := xidCode(dp.Attributes()); ok {
					s.XIDCounters = append(s.XIDCounters, nodestate.XIDCounter{Code: code, Count: c})
				}
			}, readings.of)
		case semconv.MetricGPUUnresponsive:
			// dcgmreceiver writes gpu.unresponsive in every scrape, at the
			// scrape's time, beside gpu.xid.errors with every code counted
			// so far (no metric at all while there is none): at that time
			// a code not listed counted 0.
			eachGauge(m, func(_ pmetric.NumberDataPoint, s *nodestate.GPUSample) {
				s.XIDCountersComplete = true
			}, &readings)
		}
	})
	for _, r := range readings {
		store.RecordGPU(uuid, r.ts.AsTime(), r.sample)
	}
}

// ibReading gathers the counters of one port that share a timestamp.
type ibReading struct {
	port   string
	ts     pcommon.Timestamp
	sample nodestate.IBSample
}

func recordIB(store nodestate.Store, device string, sms pmetric.ScopeMetricsSlice) {
	var readings []ibReading
	eachMetric(sms, func(m pmetric.Metric) {
		if m.Name() != semconv.MetricHWErrors {
			return
		}
		eachCounter(m, func(dp pmetric.NumberDataPoint, c nodestate.Counter, r *ibReading) {
			if k, ok := ibCounters[stringAttr(dp.Attributes(), semconv.AttrErrorType)]; ok {
				r.sample.Counters[k] = c
			}
		}, func(dp pmetric.NumberDataPoint) *ibReading {
			port := stringAttr(dp.Attributes(), semconv.AttrIBPort)
			if port == "" {
				return nil
			}
			for i := range readings {
				if readings[i].port == port && readings[i].ts == dp.Timestamp() {
					return &readings[i]
				}
			}
			if len(readings) >= maxReadingsPerSource*8 { // 8 ports' worth
				return nil
			}
			readings = append(readings, ibReading{port: port, ts: dp.Timestamp()})
			return &readings[len(readings)-1]
		})
	})
	for _, r := range readings {
		store.RecordIB(device, r.port, r.ts.AsTime(), r.sample)
	}
}

func eachMetric(sms pmetric.ScopeMetricsSlice, fn func(pmetric.Metric)) {
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			fn(ms.At(j))
		}
	}
}

// eachGauge calls fn with every usable point of a gauge and the GPU reading
// of its timestamp.
func eachGauge(m pmetric.Metric, fn func(pmetric.NumberDataPoint, *nodestate.GPUSample), readings *gpuReadings) {
	if m.Type() != pmetric.MetricTypeGauge {
		return
	}
	dps := m.Gauge().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if !usable(dp) {
			continue
		}
		if s := readings.at(dp.Timestamp()); s != nil {
			fn(dp, s)
		}
	}
}

// eachCounter calls fn with every usable point of a cumulative sum, its
// value as a counter reading, and the reading it belongs to (reading
// returns nil to skip the point).
func eachCounter[R any](m pmetric.Metric, fn func(pmetric.NumberDataPoint, nodestate.Counter, *R), reading func(pmetric.NumberDataPoint) *R) {
	if m.Type() != pmetric.MetricTypeSum || m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
		return
	}
	dps := m.Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if !usable(dp) {
			continue
		}
		c, ok := counterValue(dp)
		if !ok {
			continue
		}
		if r := reading(dp); r != nil {
			fn(dp, c, r)
		}
	}
}

// usable: a point with a time and a recorded value.
func usable(dp pmetric.NumberDataPoint) bool {
	return dp.Timestamp() != 0 && !dp.Flags().NoRecordedValue() && dp.ValueType() != pmetric.NumberDataPointValueTypeEmpty
}

func pointValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// counterValue reads a cumulative point; negative and non-finite values
// are not counts.
func counterValue(dp pmetric.NumberDataPoint) (nodestate.Counter, bool) {
	var v uint64
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		if dp.IntValue() < 0 {
			return nodestate.Counter{}, false
		}
		v = uint64(dp.IntValue())
	default:
		f := dp.DoubleValue()
		if math.IsNaN(f) || f < 0 || f >= math.MaxUint64 {
			return nodestate.Counter{}, false
		}
		v = uint64(math.Round(f))
	}
	var start time.Time
	if dp.StartTimestamp() != 0 {
		start = dp.StartTimestamp().AsTime()
	}
	return nodestate.Counter{Value: v, Start: start, Valid: true}, true
}

// xidCode reads gpu.xid: an int under otel naming, a decimal string where a
// source wrote it as text.
func xidCode(attrs pcommon.Map) (int, bool) {
	v, ok := attrs.Get(semconv.AttrGPUXID)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		if v.Int() < 0 || v.Int() > math.MaxInt32 {
			return 0, false
		}
		return int(v.Int()), true
	case pcommon.ValueTypeStr:
		code, err := strconv.Atoi(v.Str())
		return code, err == nil && code >= 0 && code <= math.MaxInt32
	}
	return 0, false
}

func stringAttr(attrs pcommon.Map, key string) string {
	v, ok := attrs.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return ""
	}
	return v.Str()
}
