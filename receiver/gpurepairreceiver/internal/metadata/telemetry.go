package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Attribute keys of the receiver's own telemetry.
const (
	// TelemetryAttrReason says why a request was refused (Reason*).
	TelemetryAttrReason = "reason"
	// TelemetryAttrKind is a job's kind: gpu_reset or verify.
	TelemetryAttrKind = "kind"
	// TelemetryAttrState is a finished job's state: passed, failed, refused.
	TelemetryAttrState = "state"
)

// Values of TelemetryAttrReason: why a request was refused before any job.
const (
	ReasonMalformed    = "malformed"     // 401: signature headers missing or malformed
	ReasonBadSignature = "bad_signature" // 401: not signed by the gateway's key
	ReasonStale        = "stale"         // 401: timestamp outside max_skew
	ReasonReplay       = "replay"        // 401: request id seen before in the window
	ReasonReplayFull   = "replay_full"   // 503: the replay cache is full (fail closed)
	ReasonOverloaded   = "overloaded"    // 503: MaxInFlight requests already being read
	ReasonWrongNode    = "wrong_node"    // 403: signed for another node
	ReasonTooLarge     = "too_large"     // 413: body over 64 KiB
	ReasonRepeatedKey  = "repeated_key"  // 400: the body names a key twice
	ReasonBadBody      = "bad_body"      // 400: not the request's JSON (unknown field, bad id...)
	ReasonConflict     = "conflict"      // 409: a job id reused for another request
	ReasonTooManyJobs  = "too_many_jobs" // 503: max_jobs unfinished jobs
	ReasonNotFound     = "not_found"     // 404/405: no such path, method or job
	ReasonUnavailable  = "unavailable"   // 503: the GPU inventory could not be read
)

// TelemetryBuilder holds the instruments of the receiver's own telemetry.
type TelemetryBuilder struct {
	// GpuRepairRequestsRefused counts requests answered with an error,
	// by reason.
	GpuRepairRequestsRefused metric.Int64Counter
	// GpuRepairJobs counts finished jobs by kind and state.
	GpuRepairJobs metric.Int64Counter
}

// Instruments of the receiver's own telemetry.
var (
	requestsRefused = telemetry.Instrument{Name: "otelcol_gpu_repair_requests_refused", Description: "Number of repair API requests refused (unsigned, badly signed, stale, replayed, for another node, malformed), by reason.", Unit: "{request}", Stability: component.StabilityLevelDevelopment}
	jobs            = telemetry.Instrument{Name: "otelcol_gpu_repair_jobs", Description: "Number of repair jobs (GPU resets, verifications) finished, by kind and final state.", Unit: "{job}", Stability: component.StabilityLevelDevelopment}
)

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		GpuRepairRequestsRefused: b.Int64Counter(requestsRefused),
		GpuRepairJobs:            b.Int64Counter(jobs),
	}, b.Err()
}
