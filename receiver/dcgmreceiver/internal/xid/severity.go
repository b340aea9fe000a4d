package xid // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/xid"

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/plog"
)

// Severity is how urgently an XID needs attention. The zero value is not a
// severity, so an entry built without one fails validation.
type Severity int

// The severities of DOMAIN.md §3, least urgent first.
const (
	Info Severity = iota + 1
	Warning
	Error
	Critical
)

var severityNames = [...]string{Info: "info", Warning: "warning", Error: "error", Critical: "critical"}

// Valid reports whether s is one of Info, Warning, Error, Critical.
func (s Severity) Valid() bool { return s >= Info && s <= Critical }

// String returns the lower-case name ("info", "warning", "error",
// "critical"), which is also the log record's severity text.
func (s Severity) String() string {
	if !s.Valid() {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// OTel maps the severity to an OpenTelemetry log severity number: info to
// INFO (9), warning to WARN (13), error to ERROR (17), critical to FATAL (21).
// An invalid severity maps to UNSPECIFIED.
func (s Severity) OTel() plog.SeverityNumber {
	switch s {
	case Info:
		return plog.SeverityNumberInfo
	case Warning:
		return plog.SeverityNumberWarn
	case Error:
		return plog.SeverityNumberError
	case Critical:
		return plog.SeverityNumberFatal
	default:
		return plog.SeverityNumberUnspecified
	}
}

// ParseSeverity reads a severity from configuration: info, warning, error or
// critical, in any letter case.
func ParseSeverity(text string) (Severity, error) {
	name := strings.ToLower(strings.TrimSpace(text))
	for s := Info; s <= Critical; s++ {
		if severityNames[s] == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("dcgmreceiver: xid: unknown severity %q (want info, warning, error or critical)", text)
}

// MarshalText writes the lower-case name, so a Severity can sit directly in
// a config struct.
func (s Severity) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("dcgmreceiver: xid: invalid severity %d", int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText is ParseSeverity for encoding.TextUnmarshaler users.
func (s *Severity) UnmarshalText(text []byte) error {
	v, err := ParseSeverity(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
