// Package nodestate is the contract between the nodestate extension, which
// keeps this node's recent GPU and InfiniBand health, the components that
// feed it (nodestateprocessor, in the metrics and logs pipelines) and those
// that read it (stepspanprocessor, in the traces pipeline).
//
// The state lives in the extension, never in a package variable or in a
// processor instance shared by pipelines (docs/architecture.md): the
// collector starts extensions before pipelines and stops them after, so the
// store outlives every component that uses it.
//
// Times are the data's own timestamps (the metric data point's or the log
// record's time), not the time the data reached the collector.
package nodestate // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Store is what the nodestate extension offers. Its methods are safe for
// concurrent use. Record methods never fail: data beyond the store's bounds
// is dropped or evicts the least recently recorded GPU or port.
type Store interface {
	// RecordGPU records one reading of a GPU, named by its gpu.uuid. Only the
	// fields marked valid are recorded; the others keep their earlier values.
	RecordGPU(uuid string, at time.Time, sample GPUSample)
	// RecordIB records one reading of the counters of an InfiniBand port
	// (ib.device, ib.port).
	RecordIB(device, port string, at time.Time, sample IBSample)
	// RecordXID records one XID event of a GPU (a gpu.xid log record).
	RecordXID(uuid string, at time.Time, code int)

	// GPUHealth summarises a GPU over [from, to]: the latest gauges at or
	// before to, and how much each counter grew between its last reading at
	// or before from and its last reading at or before to. ok is false when
	// nothing is known about the GPU at or before to, or when from > to.
	GPUHealth(uuid string, from, to time.Time) (health GPUHealth, ok bool)
	// NodeIBHealth summarises every InfiniBand port of the node over
	// [from, to], with the same counter rules as GPUHealth. ok is false when
	// no port has a reading at or before to, or when from > to.
	NodeIBHealth(from, to time.Time) (health IBHealth, ok bool)
}

// FromHost returns the Store of the extension id. The error says whether
// the extension is missing or of another kind; callers prefix their own
// name.
func FromHost(host component.Host, id component.ID) (Store, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("extension %q is not configured: add it under extensions and service::extensions", id)
	}
	store, ok := ext.(Store)
	if !ok {
		return nil, fmt.Errorf("extension %q (%T) is not a nodestate extension", id, ext)
	}
	return store, nil
}

// Gauge is an optional reading of a gauge.
type Gauge struct {
	Value float64
	Valid bool
}

// Counter is an optional reading of a cumulative counter.
type Counter struct {
	// Value is the cumulative count.
	Value uint64
	// Start is the start time of the cumulative series, zero if unknown. A
	// later start than the previous reading's marks a reset even when the
	// value did not decrease.
	Start time.Time
	Valid bool
}

// GPUCounter names the cumulative GPU counters the store keeps.
type GPUCounter int

// The GPU counters, from dcgmreceiver's gpu.nvlink.errors{error.type} and
// gpu.ecc.errors{gpu.ecc.type}.
const (
	NVLinkCRCFlitErrors GPUCounter = iota
	NVLinkCRCDataErrors
	NVLinkReplayErrors
	NVLinkRecoveryErrors
	ECCSBEVolatile
	ECCDBEVolatile
	ECCSBEAggregate
	ECCDBEAggregate
	// NumGPUCounters is the number of GPU counters, the length of the arrays.
	NumGPUCounters
)

var gpuCounterNames = [NumGPUCounters]string{
	"nvlink.crc_flit", "nvlink.crc_data", "nvlink.replay", "nvlink.recovery",
	"ecc.sbe_volatile", "ecc.dbe_volatile", "ecc.sbe_aggregate", "ecc.dbe_aggregate",
}

// String returns the counter's name, e.g. "nvlink.crc_flit".
func (c GPUCounter) String() string {
	if c < 0 || c >= NumGPUCounters {
		return fmt.Sprintf("GPUCounter(%d)", int(c))
	}
	return gpuCounterNames[c]
}

// IBCounter names the cumulative InfiniBand port counters the store keeps.
type IBCounter int

// The port counters, from ibreceiver's hw.errors{error.type}.
const (
	IBSymbolErrors IBCounter = iota
	IBLinkDowned
	IBLinkErrorRecovery
	IBPortRcvErrors
	// NumIBCounters is the number of port counters, the length of the arrays.
	NumIBCounters
)

var ibCounterNames = [NumIBCounters]string{"symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors"}

// String returns the counter's error.type, e.g. "symbol_error".
func (c IBCounter) String() string {
	if c < 0 || c >= NumIBCounters {
		return fmt.Sprintf("IBCounter(%d)", int(c))
	}
	return ibCounterNames[c]
}

// GPUSample is one reading of a GPU. Fields not marked valid are not
// recorded.
type GPUSample struct {
	// SMActive is gpu.prof.active{gpu.prof.unit=sm}, a ratio 0-1.
	SMActive Gauge
	// TemperatureC is hw.temperature{hw.sensor_location=gpu}, in Celsius.
	TemperatureC Gauge
	// ThrottleReasons are the gpu.throttle.reason values whose
	// gpu.clock.throttle reads non-zero; ThrottleValid says the reasons were
	// read at all (an empty list then means the clocks run free).
	ThrottleReasons []string
	ThrottleValid   bool
	// Counters are the cumulative error counters, indexed by GPUCounter.
	Counters [NumGPUCounters]Counter
	// XIDCounters are gpu.xid.errors{gpu.xid}: XIDs seen per code since the
	// receiver started.
	XIDCounters []XIDCounter
	// XIDCountersComplete says XIDCounters lists every code counted so far,
	// so a code missing here counted 0 at this time. dcgmreceiver writes
	// every code seen since it started in each scrape (and no metric while
	// there is none), so its scrape time qualifies. A code that first
	// appears after such a reading then counts in full from it, instead of
	// having no reading to start from.
	XIDCountersComplete bool
}

// XIDCounter is the cumulative count of one XID code.
type XIDCounter struct {
	Code  int
	Count Counter
}

// IBSample is one reading of a port's counters, indexed by IBCounter.
type IBSample struct {
	Counters [NumIBCounters]Counter
}

// GaugeReading is the latest reading of a gauge at or before a time.
type GaugeReading struct {
	Value float64
	// At is the reading's time; callers judge how stale it is.
	At    time.Time
	Valid bool
}

// ThrottleReading is the latest set of active throttle reasons at or before
// a time.
type ThrottleReading struct {
	// Reasons are sorted; empty when the clocks ran free.
	Reasons []string
	At      time.Time
	Valid   bool
}

// CounterDelta is how much a cumulative counter grew over a window.
type CounterDelta struct {
	// Delta is the growth between the readings at Since and Until. A
	// decrease (or a later series start time) is a reset: the reading after
	// it counts in full, as Prometheus' increase() does.
	Delta uint64
	// Resets is the number of resets seen between Since and Until.
	Resets int
	// Since and Until are the times of the readings the delta runs between:
	// the last at or before the window's start (or the first inside the
	// window when there is none) and the last at or before its end.
	Since, Until time.Time
	// Partial is set when no reading precedes the window's start: the delta
	// starts at the first reading inside the window and may miss growth
	// before it.
	Partial bool
	// Valid is set when a reading exists at or before the window's end.
	Valid bool
}

// XIDCount is how often one XID code occurred in a window.
type XIDCount struct {
	Code  int
	Count uint64
}

// GPUHealth is a GPU's health over a window.
type GPUHealth struct {
	UUID            string
	SMActive        GaugeReading
	TemperatureC    GaugeReading
	ThrottleReasons ThrottleReading
	// Counters are indexed by GPUCounter.
	Counters [NumGPUCounters]CounterDelta
	// XIDs are the codes seen in the window, sorted by code. Each count is
	// the larger of the gpu.xid log records in the window and the growth of
	// gpu.xid.errors for the code, so an XID seen by both is counted once.
	XIDs []XIDCount
}

// NVLinkCRCErrors is the growth of flit and data CRC errors together.
func (h GPUHealth) NVLinkCRCErrors() uint64 {
	return h.Counters[NVLinkCRCFlitErrors].Delta + h.Counters[NVLinkCRCDataErrors].Delta
}

// IBPortHealth is one port's counter growth over a window.
type IBPortHealth struct {
	Device, Port string
	// Counters are indexed by IBCounter.
	Counters [NumIBCounters]CounterDelta
}

// IBHealth is the node's InfiniBand health over a window.
type IBHealth struct {
	// Totals are the deltas summed over ports, indexed by IBCounter.
	Totals [NumIBCounters]uint64
	// Ports are the ports with a reading at or before the window's end,
	// sorted by device and port.
	Ports []IBPortHealth
}

// Inventory is the GPUs this node's own GPU receiver has reported, as the
// store holds them. The provenance processor checks the gpu.uuid and
// gpu.index that OTLP senders claim against it. Only the agent's own
// receivers feed the store (OTLP input reaches the nodestate processor
// after provenance has renamed every GPU metric and XID record), so a
// sender cannot add to it.
type Inventory interface {
	// HasGPU reports whether uuid was recorded within the retention.
	HasGPU(uuid string) bool
	// GPUCount is how many GPUs were recorded within the retention: the
	// valid gpu.index values are 0 to GPUCount()-1.
	GPUCount() int
}

// InventoryFromHost returns the Inventory of the extension id, with the
// errors of FromHost.
func InventoryFromHost(host component.Host, id component.ID) (Inventory, error) {
	store, err := FromHost(host, id)
	if err != nil {
		return nil, err
	}
	inv, ok := store.(Inventory)
	if !ok {
		return nil, fmt.Errorf("extension %q (%T) keeps no GPU inventory", id, store)
	}
	return inv, nil
}
