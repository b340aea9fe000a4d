package nodeauthextension

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	tokenA = "aaaaaaaaaaaaaaaa-token-of-gpu-a"
	tokenB = "bbbbbbbbbbbbbbbb-token-of-gpu-b"
)

func TestParseTokens(t *testing.T) {
	set, err := parseTokens("tokens", []byte(strings.Join([]string{
		"# the agents' tokens",
		"",
		tokenA + " gpu-a",
		"  " + tokenB + "\tgpu-b.example.internal   # rack 3",
		// A second token for gpu-a while its agent's is rotated.
		"cccccccccccccccc-next-of-gpu-a gpu-a",
	}, "\r\n")))
	require.NoError(t, err)
	assert.Len(t, set.byDigest, 3)
	assert.Equal(t, 2, set.nodes)
	for token, want := range map[string]tokenEntry{
		tokenA:                           {node: "gpu-a", line: 3},
		tokenB:                           {node: "gpu-b.example.internal", line: 4},
		"cccccccccccccccc-next-of-gpu-a": {node: "gpu-a", line: 5},
	} {
		got, ok := set.lookup(token)
		require.True(t, ok, token)
		assert.Equal(t, want.node, got.node)
		assert.Equal(t, want.line, got.line)
	}
	for _, unknown := range []string{"", tokenA + "x", tokenA[:len(tokenA)-1], strings.ToUpper(tokenA), "gpu-a"} {
		_, ok := set.lookup(unknown)
		assert.False(t, ok, "%q", unknown)
	}
}

// Every bad line is refused, named by file and line, and no error shows a
// token.
func TestParseTokensRefusesBadLines(t *testing.T) {
	for _, c := range []struct {
		name, file, want string
	}{
		{"a line without a node", tokenA + " gpu-a\n" + tokenB + "\n", `tokens line 2: a token without its node's name`},
		{"a token for two nodes", tokenA + " gpu-a\n\n" + tokenA + " gpu-b\n", `tokens line 3: the token of line 1 (node "gpu-a") again, for node "gpu-b": a token speaks for one node`},
		{"the same line twice", tokenA + " gpu-a\n" + tokenA + " gpu-a\n", `tokens line 2: the token of line 1 (node "gpu-a") again`},
		{"a short token", "short gpu-a\n", "tokens line 1: a token of 5 characters; at least 16"},
		{"three words", tokenA + " gpu-a rack3\n", `tokens line 1: 3 words; want "<token> <node>"`},
		{"a node name with a slash", tokenA + " gpu/a\n", `tokens line 1: node "gpu/a": '/' is not a host name's character`},
		{"a long node name", tokenA + " " + strings.Repeat("n", 254) + "\n", "tokens line 1: node name of 254 characters, at most 253"},
		{"nothing", "# no agents yet\n\n", `tokens: no "<token> <node>" line`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTokens("tokens", []byte(c.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), tokenA)
			assert.NotContains(t, err.Error(), tokenB)
		})
	}
	// All the bad lines of a file at once, not only the first.
	_, err := parseTokens("tokens", []byte(tokenA+"\n"+tokenB+"\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tokens line 1:")
	assert.Contains(t, err.Error(), "tokens line 2:")
}
