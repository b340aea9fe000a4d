package attribution

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

func hpcOnly(dir string) Settings {
	return Settings{HPCJobMapping: true, HPCJobMappingDir: dir}
}

func TestHPCJobMappingDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"0":         "4242\n",
		"1":         "\n  \n5151\n6161\n", // shared by two jobs: the first is kept
		"3.1":       "7070",               // GPU instance 1 of GPU 3
		"2":         "",                   // no job on GPU 2
		"README":    "1\n",                // not a GPU: ignored
		"3.x":       "1\n",
		"4.1.2":     "1\n",
		"01a":       "1\n",
		".5":        "1\n",
		"6/nested":  "1\n", // a directory named like a GPU: ignored
		"0.swp.tmp": "1\n",
	})

	a, err := New(hpcOnly(dir), zap.NewNop())
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), nil, nil))

	gi := func(id int) *model.MIGInstance { return &model.MIGInstance{GPUInstanceID: id} }
	tests := []struct {
		gpu  model.GPU
		want string
	}{
		{model.GPU{Index: 0}, "4242"},
		{model.GPU{Index: 1}, "5151"},
		{model.GPU{Index: 2}, ""},
		{model.GPU{Index: 3}, ""}, // only instance 1 has a job
		{model.GPU{Index: 3, MIG: gi(1)}, "7070"},
		{model.GPU{Index: 3, MIG: gi(2)}, ""},
		{model.GPU{Index: 5}, ""},
		{model.GPU{Index: 6}, ""},
	}
	for _, tt := range tests {
		owner := a.Owner(tt.gpu)
		assert.Equal(t, tt.want, owner.SlurmJobID, "%+v", tt.gpu)
		assert.Equal(t, tt.want, owner.TrainingJobID, "without torchrun the Slurm job is the training job: %+v", tt.gpu)
	}
	assert.False(t, a.hpc.failing)
}

func TestHPCJobMappingResolvedThroughGPUList(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"1": "5151\n", "4.2": "8080\n"})
	a, err := New(hpcOnly(dir), zap.NewNop())
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), testGPUs, nil))

	// The file names an index; the GPU is then found by UUID alone too.
	assert.Equal(t, "5151", a.Owner(model.GPU{Index: 99, UUID: testGPUs[1].UUID}).SlurmJobID)
	assert.Equal(t, "8080", a.Owner(testGPUs[5]).SlurmJobID)
	assert.Empty(t, a.Owner(testGPUs[4]).SlurmJobID)
}

func TestHPCBadFileKeepsTheOthers(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"0": "4242\n",
		"1": "job\x01id\n",                   // not a job id
		"2": strings.Repeat("9", 300) + "\n", // too long to be one
	})
	core, logs := observer.New(zapcore.DebugLevel)
	a, err := New(hpcOnly(dir), zap.New(core))
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, a.Refresh(context.Background(), nil, nil))
	}
	assert.Equal(t, "4242", a.Owner(model.GPU{Index: 0}).SlurmJobID)
	assert.Empty(t, a.Owner(model.GPU{Index: 1}).SlurmJobID)
	assert.Empty(t, a.Owner(model.GPU{Index: 2}).SlurmJobID)

	failing := logs.FilterMessageSnippet("source failing").AllUntimed()
	require.Len(t, failing, 1, "logged once, not per refresh")
	assert.Equal(t, zapcore.WarnLevel, failing[0].Level)
	assert.Contains(t, failing[0].ContextMap()["error"], "line 1: not a job id")

	// Fixing the files is logged once as a recovery.
	writeFiles(t, dir, map[string]string{"1": "5151\n", "2": "6262\n"})
	require.NoError(t, a.Refresh(context.Background(), nil, nil))
	require.NoError(t, a.Refresh(context.Background(), nil, nil))
	assert.Equal(t, "5151", a.Owner(model.GPU{Index: 1}).SlurmJobID)
	assert.Len(t, logs.FilterMessageSnippet("source recovered").AllUntimed(), 1)
}

func TestParseMappingFileName(t *testing.T) {
	tests := []struct {
		name string
		want deviceRef
		ok   bool
	}{
		{"0", indexRef(0, wholeGPU), true},
		{"15", indexRef(15, wholeGPU), true},
		{"3.1", indexRef(3, 1), true},
		{"3.", deviceRef{}, false},
		{".1", deviceRef{}, false},
		{"3.1.2", deviceRef{}, false},
		{"a", deviceRef{}, false},
		{"+1", deviceRef{}, false},
		{"1e3", deviceRef{}, false},
		{"", deviceRef{}, false},
		{"99999999999999999999999", deviceRef{}, false},
	}
	for _, tt := range tests {
		got, ok := parseMappingFileName(tt.name)
		assert.Equal(t, tt.ok, ok, tt.name)
		assert.Equal(t, tt.want, got, tt.name)
	}
}

func TestReadMappingFileSkipsNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "0"), 0o755))
	job, err := readMappingFile(filepath.Join(dir, "0"))
	require.NoError(t, err)
	assert.Empty(t, job)

	_, err = readMappingFile(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
