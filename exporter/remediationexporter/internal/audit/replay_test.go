package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func replayAll(t *testing.T, path string) ([]Entry, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	var got []Entry
	n, err := Replay(zap.New(core), path, func(e Entry) { got = append(got, e) })
	require.NoError(t, err)
	assert.Len(t, got, n)
	return got, logs
}

func TestReplayReadsWhatRecordWrote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(zap.NewNop(), path)
	require.NoError(t, err)
	at := time.Date(2025, 3, 14, 9, 27, 15, 0, time.UTC)
	want := []Entry{
		{Time: at, Decision: DecisionDryRun, Step: "quarantine", FaultID: "a1", Node: "xl003", Actions: []string{"cordon", "taint"}},
		{Time: at.Add(time.Second), Decision: DecisionActed, Step: "webhook", FaultID: "a1", Severity: "P1", Rule: "p1_hardware"},
	}
	for _, e := range want {
		require.NoError(t, l.Record(e))
	}
	require.NoError(t, l.Close())

	got, logs := replayAll(t, path)
	assert.Equal(t, want, got)
	assert.Zero(t, logs.Len(), "no warnings for a clean file")
}

func TestReplayMissingFileIsEmpty(t *testing.T) {
	got, logs := replayAll(t, filepath.Join(t.TempDir(), "none.jsonl"))
	assert.Empty(t, got)
	assert.Zero(t, logs.Len())
}

func TestReplaySkipsCorruptAndTruncatedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	content := strings.Join([]string{
		`{"time":"2025-03-14T09:27:15Z","decision":"acted","step":"quarantine","fault.id":"a1"}`,
		`not json at all`,
		``,
		`{"time":"2025-03-14T09:27:16Z","decision":"acted"}`, // no step
		`{"time":"2025-03-14T09:27:17Z","decision":"dry_run","step":"webhook","fault.id":"a2"}`,
		`{"time":"2025-03-14T09:27:18Z","decision":"acted","step":"quarant`, // the crash cut it
	}, "\n")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))

	got, logs := replayAll(t, path)
	require.Len(t, got, 2)
	assert.Equal(t, "a1", got[0].FaultID)
	assert.Equal(t, "a2", got[1].FaultID)

	warnings := logs.All()
	require.Len(t, warnings, 3)
	var lines []int64
	for _, w := range warnings {
		assert.Equal(t, path, w.ContextMap()["file"])
		lines = append(lines, w.ContextMap()["line"].(int64))
	}
	assert.Equal(t, []int64{2, 4, 6}, lines)
	assert.Contains(t, warnings[2].Message, "cut short")
}

func TestReplaySkipsOverlongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	long := `{"decision":"acted","step":"webhook","reason":"` + strings.Repeat("x", MaxLineBytes) + `"}`
	ok := `{"decision":"acted","step":"webhook","fault.id":"a3"}`
	require.NoError(t, os.WriteFile(path, []byte(long+"\n"+ok+"\n"), 0o600))

	got, logs := replayAll(t, path)
	require.Len(t, got, 1)
	assert.Equal(t, "a3", got[0].FaultID)
	require.Equal(t, 1, logs.Len())
	assert.Equal(t, int64(1), logs.All()[0].ContextMap()["line"])
}

// A crash that cut the last line must not swallow the next life's first
// entry: Open starts it on a line of its own.
func TestOpenEndsACutLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"decision":"acted","step":"quarantine","fault.id":"a1"}`+"\n"+`{"decision":"ac`), 0o600))
	l, err := Open(zap.NewNop(), path)
	require.NoError(t, err)
	require.NoError(t, l.Record(Entry{Decision: DecisionSkipped, Step: "record", FaultID: "a2"}))
	require.NoError(t, l.Close())

	got, logs := replayAll(t, path)
	require.Len(t, got, 2)
	assert.Equal(t, "a1", got[0].FaultID)
	assert.Equal(t, "a2", got[1].FaultID)
	assert.Equal(t, 1, logs.Len(), "only the cut line is skipped")
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"time":"2025-03-14T09:27:15Z","decision":"acted","step":"quarantine","fault.id":"a1","actions":["cordon"]}`))
	f.Add([]byte(`{"decision":"dry_run","step":"webhook","attempts":3}`))
	f.Add([]byte(`{"decision":"acted","step":"quarant`))
	f.Add([]byte(`{"time":"bogus"}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line) // never panics
		if err != nil {
			return
		}
		if e.Decision == "" || e.Step == "" {
			t.Fatalf("accepted an entry without decision or step: %q", line)
		}
		// What it accepts, Record can write back and Replay reads again.
		out, err := json.Marshal(e)
		if err != nil {
			return // e.g. a time json cannot write back; not written by Record either
		}
		again, err := ParseLine(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if again.FaultID != e.FaultID || again.Step != e.Step || !again.Time.Equal(e.Time) {
			t.Fatalf("round trip changed %+v to %+v", e, again)
		}
	})
}

// BenchmarkReplay reads back 10,000 quarantine entries, the start-up cost
// of a restart after a busy week.
func BenchmarkReplay(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.jsonl")
	l, err := Open(zap.NewNop(), path)
	require.NoError(b, err)
	at := time.Date(2025, 3, 14, 9, 27, 15, 0, time.UTC)
	const entries = 10000
	for i := range entries {
		require.NoError(b, l.Record(Entry{Time: at, Decision: DecisionActed, Step: "quarantine", FaultID: "a07573c9c14f1fae",
			FaultType: "gpu.memory.dbe", State: "open", Severity: "P1", Node: "xl003", Platform: "kubernetes",
			Actions: []string{"cordon", "taint", "condition"}, Outcome: "applied", Rule: "p1_hardware", Attempts: i%3 + 1,
			Reason: "cordoned, tainted otelcol-gpu.io/gpu-fault=gpu.memory.dbe:NoSchedule"}))
	}
	require.NoError(b, l.Close())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n, err := Replay(zap.NewNop(), path, func(Entry) {})
		if err != nil || n != entries {
			b.Fatalf("replayed %d, %v", n, err)
		}
	}
}
