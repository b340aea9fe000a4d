package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is two levels above this package.
var repoRoot = filepath.Join("..", "..")

// TestConfigCopiesMatchDistributions: kustomize cannot read files outside
// its root, so base/ holds copies of the collector configs; a stale copy
// would deploy an old config.
func TestConfigCopiesMatchDistributions(t *testing.T) {
	for _, name := range []string{"agent", "gateway"} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(repoRoot, "distributions", name, "config.yaml"))
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join("base", name+"-config.yaml"))
			require.NoError(t, err)
			if !bytes.Equal(want, got) {
				t.Fatalf("deploy/kubernetes/base/%s-config.yaml differs from distributions/%s/config.yaml: run deploy/kubernetes/sync-configs.sh", name, name)
			}
		})
	}
}
