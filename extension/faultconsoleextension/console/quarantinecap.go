package console // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"

import "time"

// QuarantineCap is remediation's cap on the share of GPU nodes it holds
// quarantined at once (max_quarantined_fraction), and the faults it
// refused that wait until a node is released.
type QuarantineCap struct {
	// Fraction is max_quarantined_fraction; Limit the nodes it allows of
	// GPUNodes; Held the nodes quarantined by remediation, as the platform
	// counted them at ReadAt (zero: not read yet).
	Fraction float64
	Limit    int
	GPUNodes int
	Held     int
	ReadAt   time.Time
	// TripsBreaker: a refusal trips the breaker (quarantine_cap_trips_breaker).
	TripsBreaker bool
	// Waiting are the faults the cap refused and remediation has not acted
	// on, most severe and oldest first.
	Waiting []CapWaiting
}

// CapWaiting is one fault the quarantine cap refused.
type CapWaiting struct {
	FaultID  string
	Type     string
	Severity string
	Node     string
	// Since is the first refusal, Last the latest.
	Since time.Time
	Last  time.Time
}
