package xid

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// known reports whether code has an entry of its own in c (Lookup answers
// every code).
func known(c *Catalogue, code int) bool {
	_, ok := c.entries[code]
	return ok
}

// TestBuiltinMatchesDomainTable checks every row of DOMAIN.md §3, with the
// paired rows (62/63, 94/95, 119/120) split into one entry per code.
func TestBuiltinMatchesDomainTable(t *testing.T) {
	want := []Entry{
		{13, "Graphics engine exception", Warning, "restart the process"},
		{31, "GPU memory page fault", Warning, "check the CUDA kernel for out-of-bounds access"},
		{45, "Preemptive channel removal", Error, "often follows an ECC DBE: check memory"},
		{48, "Double-bit ECC error", Critical, "isolate the node now; likely hardware replacement"},
		{62, "ECC page retirement failed", Error, "deep memory fault: replace the GPU"},
		{63, "Too many ECC page retirements", Error, "deep memory fault: replace the GPU"},
		{74, "NVLink error", Critical, "check NVLink cables / switch chip"},
		{79, "GPU fell off the bus", Critical, "PCIe physical fault"},
		{92, "High single-bit ECC rate", Warning, "replace in a maintenance window"},
		{94, "Contained ECC error", Critical, "data may be wrong: verify checkpoint integrity"},
		{95, "Uncontained ECC error", Critical, "data may be wrong: verify checkpoint integrity"},
		{119, "GPU recovery action", Warning, "driver-level recovery, no intervention"},
		{120, "GPU recovery action", Info, "driver-level recovery, no intervention"},
	}
	c, err := New(nil)
	require.NoError(t, err)
	assert.Len(t, c.entries, len(want), "catalogue without overrides is exactly the table")
	assert.Equal(t, want, builtin)
	for _, w := range want {
		assert.True(t, known(c, w.Code), "code %d", w.Code)
		assert.Equal(t, w, c.Lookup(w.Code), "code %d", w.Code)
	}
}

// The catalogue keeps copies: changing the overrides it was built from
// later must not change it.
func TestCatalogueCopiesOverrides(t *testing.T) {
	overrides := []Entry{{Code: 13, Name: "Graphics engine exception", Severity: Warning, Action: "restart the process"}}
	c, err := New(overrides)
	require.NoError(t, err)
	overrides[0].Severity = Critical
	assert.Equal(t, Warning, c.Lookup(13).Severity, "changing the overrides must not change the catalogue")
}

func TestLookupUnknown(t *testing.T) {
	c, err := New(nil)
	require.NoError(t, err)
	e := c.Lookup(43)
	assert.False(t, known(c, 43))
	assert.Equal(t, 43, e.Code)
	assert.Equal(t, UnknownName, e.Name)
	assert.Equal(t, Warning, e.Severity)
	assert.Equal(t, UnknownAction, e.Action)
	assert.NotEmpty(t, e.Action)
}

func TestOverridesReplaceAndAdd(t *testing.T) {
	c, err := New([]Entry{
		{Code: 119, Name: "GSP RPC timeout", Severity: Error, Action: "drain and reset the GPU"},
		{Code: 43, Name: "GPU stopped processing", Severity: Info, Action: "the application hit an error"},
	})
	require.NoError(t, err)
	assert.Equal(t, Entry{119, "GSP RPC timeout", Error, "drain and reset the GPU"}, c.Lookup(119))
	assert.Equal(t, Entry{43, "GPU stopped processing", Info, "the application hit an error"}, c.Lookup(43))
	assert.True(t, known(c, 43))
	// Untouched built-ins stay.
	assert.Equal(t, Critical, c.Lookup(79).Severity)
	assert.Len(t, c.entries, len(builtin)+1)

	// Overrides in one catalogue do not leak into another.
	plain, err := New(nil)
	require.NoError(t, err)
	assert.Equal(t, Warning, plain.Lookup(119).Severity)
	assert.False(t, known(plain, 43))
}

func TestOverridesInvalid(t *testing.T) {
	tests := []struct {
		name     string
		override []Entry
		wantErrs []string
	}{
		{"zero code", []Entry{{Code: 0, Name: "x", Severity: Info}}, []string{"override [0] (code 0)", "code must be > 0"}},
		{"negative code", []Entry{{Code: 13, Name: "ok", Severity: Info}, {Code: -4, Name: "x", Severity: Info}}, []string{"override [1] (code -4)", "code must be > 0"}},
		{"empty name", []Entry{{Code: 48, Severity: Critical}}, []string{"override [0] (code 48)", "name must not be empty"}},
		{"no severity", []Entry{{Code: 48, Name: "DBE"}}, []string{"override [0] (code 48)", "unknown severity 0"}},
		{"severity out of range", []Entry{{Code: 48, Name: "DBE", Severity: Critical + 1}}, []string{"unknown severity 5"}},
		{"duplicate code", []Entry{{Code: 79, Name: "a", Severity: Info}, {Code: 79, Name: "b", Severity: Info}}, []string{"override [1] (code 79)", "already given by override [0]"}},
		{"every problem reported", []Entry{{Code: 0}, {Code: 7, Name: "x"}}, []string{"override [0] (code 0): code must be > 0; name must not be empty; unknown severity 0", "override [1] (code 7)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.override)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.True(t, strings.HasPrefix(err.Error(), "dcgmreceiver: xid: "), err.Error())
			for _, w := range tt.wantErrs {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
