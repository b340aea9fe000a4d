// Package xid is the catalogue of NVIDIA XID codes the dcgm receiver knows:
// a name, a severity and the action an operator should take for each, as in
// DOMAIN.md §3. Configuration may replace entries or add codes; codes that
// are in neither get a generic "unknown" entry, so every XID still becomes a
// log record.
package xid // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/xid"

import (
	"errors"
	"fmt"
	"strings"
)

// Entry describes one XID code.
type Entry struct {
	Code     int
	Name     string
	Severity Severity
	Action   string
}

// UnknownName, UnknownSeverity and UnknownAction describe a code that is in
// neither the built-in table nor the overrides. Warning, not info: an XID
// nobody has classified still deserves a look.
const (
	UnknownName     = "Unknown XID"
	UnknownSeverity = Warning
	UnknownAction   = "look the code up in NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors)"
)

// builtin is DOMAIN.md §3, one entry per code. The table pairs 62/63, 94/95
// and 119/120 in one row; each gets its own entry here with the row's wording.
// Some names differ from NVIDIA's current catalogue (which calls 119 and 120
// GSP RPC timeout and GSP error); the project's table is the reference and
// configuration can override any entry.
var builtin = []Entry{
	{Code: 13, Name: "Graphics engine exception", Severity: Warning, Action: "restart the process"},
	{Code: 31, Name: "GPU memory page fault", Severity: Warning, Action: "check the CUDA kernel for out-of-bounds access"},
	{Code: 45, Name: "Preemptive channel removal", Severity: Error, Action: "often follows an ECC DBE: check memory"},
	{Code: 48, Name: "Double-bit ECC error", Severity: Critical, Action: "isolate the node now; likely hardware replacement"},
	{Code: 62, Name: "ECC page retirement failed", Severity: Error, Action: "deep memory fault: replace the GPU"},
	{Code: 63, Name: "Too many ECC page retirements", Severity: Error, Action: "deep memory fault: replace the GPU"},
	{Code: 74, Name: "NVLink error", Severity: Critical, Action: "check NVLink cables / switch chip"},
	{Code: 79, Name: "GPU fell off the bus", Severity: Critical, Action: "PCIe physical fault"},
	{Code: 92, Name: "High single-bit ECC rate", Severity: Warning, Action: "replace in a maintenance window"},
	{Code: 94, Name: "Contained ECC error", Severity: Critical, Action: "data may be wrong: verify checkpoint integrity"},
	{Code: 95, Name: "Uncontained ECC error", Severity: Critical, Action: "data may be wrong: verify checkpoint integrity"},
	{Code: 119, Name: "GPU recovery action", Severity: Warning, Action: "driver-level recovery, no intervention"},
	{Code: 120, Name: "GPU recovery action", Severity: Info, Action: "driver-level recovery, no intervention"},
}

// Catalogue maps XID codes to entries. It is read-only once built and safe
// for concurrent use.
type Catalogue struct {
	entries map[int]Entry
}

// New returns the built-in table with overrides applied: an override with a
// code already in the table replaces that entry whole, others add a code.
// Every override must have a code > 0, a non-empty name and a valid
// severity, and a code may appear only once; the error lists every bad
// override by its index and code.
func New(overrides []Entry) (*Catalogue, error) {
	c := &Catalogue{entries: make(map[int]Entry, len(builtin)+len(overrides))}
	for _, e := range builtin {
		c.entries[e.Code] = e
	}
	var errs []error
	firstIndex := make(map[int]int, len(overrides))
	for i, e := range overrides {
		if err := validate(e); err != nil {
			errs = append(errs, fmt.Errorf("dcgmreceiver: xid: override [%d] (code %d): %w", i, e.Code, err))
			continue
		}
		if j, dup := firstIndex[e.Code]; dup {
			errs = append(errs, fmt.Errorf("dcgmreceiver: xid: override [%d] (code %d): code already given by override [%d]", i, e.Code, j))
			continue
		}
		firstIndex[e.Code] = i
		c.entries[e.Code] = e
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// validate returns what is wrong with an override, every problem at once.
func validate(e Entry) error {
	var problems []string
	if e.Code <= 0 {
		problems = append(problems, "code must be > 0")
	}
	if e.Name == "" {
		problems = append(problems, "name must not be empty")
	}
	if !e.Severity.Valid() {
		problems = append(problems, fmt.Sprintf("unknown severity %d (want info, warning, error or critical)", int(e.Severity)))
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

// Lookup returns the entry for code, or for a code the catalogue does not
// know an entry named UnknownName with UnknownSeverity and UnknownAction.
func (c *Catalogue) Lookup(code int) Entry {
	if e, ok := c.entries[code]; ok {
		return e
	}
	return Entry{Code: code, Name: UnknownName, Severity: UnknownSeverity, Action: UnknownAction}
}
