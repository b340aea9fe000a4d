package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func readLines(t *testing.T, path string) []Entry {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Entry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
		out = append(out, e)
	}
	return out
}

func TestRecordLogsAndAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	// Something already in the file stays: the file is append-only.
	require.NoError(t, os.WriteFile(path, []byte(`{"decision":"acted","step":"quarantine","fault.id":"old"}`+"\n"), 0o600))

	core, logs := observer.New(zapcore.InfoLevel)
	l, err := Open(zap.New(core), path)
	require.NoError(t, err)
	at := time.Date(2025, 3, 14, 9, 27, 15, 0, time.UTC)
	require.NoError(t, l.Record(Entry{Time: at, Decision: DecisionActed, Step: "quarantine", FaultID: "a07573c9c14f1fae", Node: "xl003", Actions: []string{"cordon"}}))
	require.NoError(t, l.Record(Entry{Time: at, Decision: DecisionFailed, Step: "webhook", FaultID: "a07573c9c14f1fae", Reason: "503"}))
	require.NoError(t, l.Close())
	require.NoError(t, l.Record(Entry{Decision: DecisionSkipped, Step: "record"}), "after Close it only logs")

	lines := readLines(t, path)
	require.Len(t, lines, 3)
	assert.Equal(t, "old", lines[0].FaultID)
	assert.Equal(t, "xl003", lines[1].Node)
	assert.Equal(t, at, lines[1].Time)
	assert.Equal(t, DecisionFailed, lines[2].Decision)

	require.Equal(t, 3, logs.Len())
	assert.Equal(t, zapcore.WarnLevel, logs.All()[1].Level, "failures are warnings")
	assert.Equal(t, "a07573c9c14f1fae", logs.All()[0].ContextMap()["fault.id"])
}

func TestOpenFailsOnBadPath(t *testing.T) {
	_, err := Open(zap.NewNop(), filepath.Join(t.TempDir(), "missing", "audit.jsonl"))
	assert.Error(t, err)
	l, err := Open(zap.NewNop(), "")
	require.NoError(t, err)
	assert.NoError(t, l.Record(Entry{Decision: DecisionSkipped}), "log only")
	assert.NoError(t, l.Close())
}
