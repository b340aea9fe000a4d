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

// distributionCopies: each file of distributions/<name>/ that base/ holds a
// copy of, under base/<name>-<file>.
var distributionCopies = []string{"config.yaml", "kafka-tls-sasl.yaml"}

// TestConfigCopiesMatchDistributions: kustomize cannot read files outside
// its root, so base/ holds copies of the collector configs and their Kafka
// TLS/SASL fragments; a stale copy would deploy an old config.
func TestConfigCopiesMatchDistributions(t *testing.T) {
	for _, name := range []string{"agent", "gateway"} {
		for _, file := range distributionCopies {
			t.Run(name+"/"+file, func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join(repoRoot, "distributions", name, file))
				require.NoError(t, err)
				got, err := os.ReadFile(filepath.Join("base", name+"-"+file))
				require.NoError(t, err)
				if !bytes.Equal(want, got) {
					t.Fatalf("deploy/kubernetes/base/%s-%s differs from distributions/%s/%s: run deploy/kubernetes/sync-configs.sh", name, file, name, file)
				}
			})
		}
	}
}
