package remediationexporter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// withAuditFile makes the exporter audit to path, shared between lives.
func withAuditFile(path string) harnessOpt {
	return func(c *Config, _ *dependencies) { c.AuditFile = path }
}

func withDryRun(on bool) harnessOpt {
	return func(c *Config, _ *dependencies) { c.DryRun = on }
}

func entriesWith(t *testing.T, path, step, decision, reason string) []audit.Entry {
	return auditEntries(t, path, func(e audit.Entry) bool {
		return e.Step == step && e.Decision == decision && (reason == "" || e.Reason == reason)
	})
}

// A gateway killed and restarted gets the uncommitted fault records again:
// the second life must not act on a fault the first one acted on.
func TestRestartRemembersFaultsActedOn(t *testing.T) {
	for _, dryRun := range []bool{true, false} {
		name := "acting"
		if dryRun {
			name = "dry_run"
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)

			first := newHarness(t, withAuditFile(path), withDryRun(dryRun))
			require.NoError(t, first.consume(dbe))
			require.NoError(t, first.exp.Shutdown(context.Background()))
			firstQ, _ := first.platform.counts()

			second := newHarness(t, withAuditFile(path), withDryRun(dryRun))
			require.NoError(t, second.consume(dbe), "the redelivered record")
			q, _ := second.platform.counts()
			assert.Zero(t, q, "the platform is not called again")
			assert.Empty(t, second.hook.got(), "no second webhook")
			assert.Len(t, entriesWith(t, path, stepQuarantine, audit.DecisionSkipped, "duplicate: fault already acted on"), 1)
			assert.Len(t, entriesWith(t, path, stepWebhook, audit.DecisionSkipped, "duplicate: webhook already sent for this fault"), 1)
			assert.Equal(t, 1, second.logs.FilterMessage("remediation state restored from the audit file").Len())

			if dryRun {
				assert.Zero(t, firstQ)
				assert.Len(t, entriesWith(t, path, stepQuarantine, audit.DecisionDryRun, ""), 1, "one dry-run quarantine across both lives")
				return
			}
			assert.Equal(t, 1, firstQ)
			assert.Len(t, first.hook.got(), 1)

			// The node is known as quarantined by this exporter, but it
			// waits for a human: its return to service is not automatic.
			require.NoError(t, second.consume(withState(dbe, fault.StateResolved)))
			second.clock.Advance(24 * time.Hour)
			_, r := second.platform.counts()
			assert.Zero(t, r)
			assert.Len(t, entriesWith(t, path, stepRelease, audit.DecisionSkipped, "waits for a human: "+heldSinceRestart), 1)
			assert.Len(t, second.hook.got(), 1, "the resolution is still posted")
		})
	}
}

func TestRestartWithACutAuditFileStillStarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	first := newHarness(t, withAuditFile(path))
	require.NoError(t, first.consume(dbe))
	require.NoError(t, first.exp.Shutdown(context.Background()))

	// A corrupt line, then a last line the crash cut short.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\x00\x00garbage\n" + `{"time":"2025-03-14T09:31:00Z","decision":"acted","step":"quaran`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	lines := len(readLines(t, path))

	second := newHarness(t, withAuditFile(path))
	warnings := second.logs.FilterMessageSnippet("audit file:").All()
	require.Len(t, warnings, 2)
	assert.Equal(t, path, warnings[0].ContextMap()["file"])
	assert.Equal(t, int64(lines-1), warnings[0].ContextMap()["line"])
	assert.Equal(t, int64(lines), warnings[1].ContextMap()["line"])
	assert.Contains(t, warnings[1].Message, "cut short")

	require.NoError(t, second.consume(dbe))
	q, _ := second.platform.counts()
	assert.Zero(t, q, "the entries before the damage still count")
	assert.Empty(t, second.hook.got())
}

// A dry run did nothing, so it does not hold back an exporter that acts;
// entries past the fault state's retention are forgotten as in one life.
func TestRestartIgnoresDryRunWhenActingAndOldEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	now := newFakeClock().Now()
	tried := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	old := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl004", fault.StateOpen)
	l, err := audit.Open(zap.NewNop(), path)
	require.NoError(t, err)
	for _, e := range []audit.Entry{
		{Time: now.Add(-time.Minute), Decision: audit.DecisionDryRun, Step: stepQuarantine, FaultID: tried.ID,
			Node: "xl003", Platform: "kubernetes", Actions: []string{"cordon", "taint", "condition"}},
		{Time: now.Add(-lifecycle.OpenRetention - time.Hour), Decision: audit.DecisionActed, Step: stepQuarantine, FaultID: old.ID,
			Node: "xl004", Platform: "kubernetes", Actions: []string{"cordon", "taint", "condition"}},
	} {
		require.NoError(t, l.Record(e))
	}
	require.NoError(t, l.Close())

	h := newHarness(t, withAuditFile(path))
	require.NoError(t, h.consume(tried, old))
	q, _ := h.platform.counts()
	assert.Equal(t, 2, q)
}

// readLines splits the file into its lines, the last one with or without
// a newline.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
