package semconv

// Names the step record (internal/steprecord) writes that the other semconv
// files do not hold.
const (
	// AttrServiceName is OpenTelemetry's service.name: the training program
	// on a rank's resource, the gateway on the spans the straggler
	// processor derives.
	AttrServiceName = "service.name"
	// AttrDurationNs is a step log record's length (docs/training-scripts.md,
	// "The log-record alternative"); the steplogs connector turns it into
	// the span's end.
	AttrDurationNs = "duration_ns"
)
