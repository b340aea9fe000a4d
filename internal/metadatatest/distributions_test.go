package metadatatest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fakePkg = "example.com/repo/receiver/fakereceiver"

func fakeManifest(name string, receivers ...manifestEntry) manifest {
	var m manifest
	m.Dist.Name = name
	m.Receivers = receivers
	return m
}

func TestCheckDistributions(t *testing.T) {
	md := readFake(t)
	own := manifestEntry{GoMod: "example.com/repo v0.0.0", Import: fakePkg}
	other := manifestEntry{GoMod: "example.com/other v1.0.0"}
	manifests := map[string]manifest{
		"a.yaml": fakeManifest("dist-a", own, other),
		"b.yaml": fakeManifest("dist-b", own),
		"c.yaml": fakeManifest("dist-c", other),
	}
	assert.Empty(t, checkDistributions(md, fakePkg, manifests))

	delete(manifests, "b.yaml")
	assert.Equal(t, problems{
		"status.distributions: metadata.yaml has [dist-a dist-b], the ocb manifests ship " + fakePkg + " in [dist-a]",
	}, checkDistributions(md, fakePkg, manifests))
}

// A component listed in the wrong section of a manifest is reported.
func TestCheckDistributionsSection(t *testing.T) {
	md := readFake(t)
	md.Status.Distributions = []string{"dist-a"}
	m := fakeManifest("dist-a")
	m.Processors = []manifestEntry{{Import: fakePkg}}
	assert.Equal(t, problems{
		"a.yaml lists " + fakePkg + " among its processors, metadata.yaml's status.class is receiver",
	}, checkDistributions(md, fakePkg, map[string]manifest{"a.yaml": m}))
}

// A manifest entry without import is its gomod's module.
func TestManifestEntryImportPath(t *testing.T) {
	assert.Equal(t, "example.com/x", manifestEntry{GoMod: "example.com/x v1.2.3"}.importPath())
	assert.Equal(t, "example.com/x/y", manifestEntry{GoMod: "example.com/x v1.2.3", Import: "example.com/x/y"}.importPath())
}

func TestReadManifests(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "distributions", "agent"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "builder-config.yaml"), []byte("dist: {name: all}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "distributions", "agent", "manifest.yaml"),
		[]byte("dist: {name: agent}\nreceivers:\n  - gomod: example.com/r v1.0.0\n"), 0o600))
	ms, err := readManifests(root)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, "agent", ms[filepath.Join(root, "distributions", "agent", "manifest.yaml")].Dist.Name)

	_, err = readManifests(t.TempDir())
	require.ErrorContains(t, err, "no ocb manifest")
}

func TestFindModule(t *testing.T) {
	root, module, err := findModule()
	require.NoError(t, err)
	assert.Equal(t, "github.com/otelcol-gpu/otelcol-gpu", module)
	assert.FileExists(t, filepath.Join(root, "go.mod"))
}
