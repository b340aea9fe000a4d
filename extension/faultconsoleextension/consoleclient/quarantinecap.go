package consoleclient // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"

import "time"

// QuarantineCap is remediation's cap on the share of GPU nodes it holds
// quarantined at once, in GET /api/v1/breaker. Reached is true while
// faults it refused wait: the page shows a banner.
type QuarantineCap struct {
	Reached bool `json:"reached"`
	// Fraction is max_quarantined_fraction; Limit the nodes it allows of
	// GPUNodes; Held the nodes quarantined by remediation, as counted at
	// ReadAt (absent: not read yet).
	Fraction     float64      `json:"fraction"`
	Limit        int          `json:"limit"`
	GPUNodes     int          `json:"gpu_nodes"`
	Held         int          `json:"held"`
	ReadAt       *time.Time   `json:"read_at,omitempty"`
	TripsBreaker bool         `json:"trips_breaker"`
	Waiting      []CapWaiting `json:"waiting"`
}

// CapWaiting is one fault the cap refused, waiting to be acted on.
type CapWaiting struct {
	FaultID  string    `json:"fault_id"`
	Type     string    `json:"type"`
	Severity string    `json:"severity"`
	Node     string    `json:"node"`
	Since    time.Time `json:"since"`
	Last     time.Time `json:"last"`
}
