package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// repoRoot is two levels above this package.
var repoRoot = filepath.Join("..", "..")

// otlpAuthFragment is distributions/agent/otlp-auth.yaml's file name.
const otlpAuthFragment = "otlp-auth.yaml"

// collectorConfig is what these tests read of a collector config file.
type collectorConfig struct {
	Extensions map[string]any `json:"extensions"`
	Receivers  map[string]struct {
		Protocols map[string]struct {
			Auth struct {
				Authenticator string `json:"authenticator"`
			} `json:"auth"`
		} `json:"protocols"`
	} `json:"receivers"`
	Service struct {
		Extensions []string `json:"extensions"`
	} `json:"service"`
}

func readCollectorConfig(t *testing.T, distribution, file string) collectorConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "distributions", distribution, file))
	require.NoError(t, err)
	var cfg collectorConfig
	require.NoError(t, yaml.Unmarshal(b, &cfg), file)
	return cfg
}

// TestOTLPAuthFragment: merged over the agent's config, the fragment puts
// its authenticator on both OTLP protocols the config serves, and, since a
// merge replaces lists, restates every extension of the config besides its
// own: an extension added to config.yaml and not here would silently stop
// running wherever OTLP auth is on.
func TestOTLPAuthFragment(t *testing.T) {
	base := readCollectorConfig(t, "agent", "config.yaml")
	frag := readCollectorConfig(t, "agent", otlpAuthFragment)

	require.Len(t, frag.Extensions, 1, "one authenticator")
	var auth string
	for name := range frag.Extensions {
		auth = name
	}
	assert.Regexp(t, `^bearertokenauth(/.+)?$`, auth)
	assert.NotContains(t, base.Extensions, auth, "config.yaml must not define the authenticator itself")

	otlp, ok := base.Receivers["otlp"]
	require.True(t, ok, "config.yaml has no otlp receiver")
	require.NotEmpty(t, otlp.Protocols)
	for protocol := range otlp.Protocols {
		assert.Equal(t, auth, frag.Receivers["otlp"].Protocols[protocol].Auth.Authenticator,
			"otlp protocol %s is served without authentication", protocol)
	}

	want := append(slices.Clone(base.Service.Extensions), auth)
	assert.ElementsMatch(t, want, frag.Service.Extensions,
		"service.extensions of %s: config.yaml's plus %s", otlpAuthFragment, auth)
}
