package slurm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpandHostlist(t *testing.T) {
	for expr, want := range map[string][]string{
		"gpu-node1":              {"gpu-node1"},
		"gpu-node[1-3]":          {"gpu-node1", "gpu-node2", "gpu-node3"},
		"gpu-node[1,3-4],login1": {"gpu-node1", "gpu-node3", "gpu-node4", "login1"},
		"xl[008-010]":            {"xl008", "xl009", "xl010"},
		"r[1-2]-g[1-2]":          {"r1-g1", "r1-g2", "r2-g1", "r2-g2"},
		"a[1-2],b[3],c":          {"a1", "a2", "b3", "c"},
		"":                       nil,
	} {
		got, err := expandHostlist(expr)
		require.NoError(t, err, expr)
		assert.Equal(t, want, got, expr)
	}
	for _, bad := range []string{"gpu[1-", "gpu]1", "gpu[3-1]", "gpu[a-b]", "gpu[0-999999999]"} {
		_, err := expandHostlist(bad)
		assert.Error(t, err, bad)
	}
	in, err := hostlistContains("gpu-node[1-4]", "gpu-node3")
	require.NoError(t, err)
	assert.True(t, in)
	in, err = hostlistContains("gpu-node[1-4]", "gpu-node5")
	require.NoError(t, err)
	assert.False(t, in)
	in, _ = hostlistContains("ALL", "x")
	assert.True(t, in)
	in, _ = hostlistContains("(null)", "x")
	assert.False(t, in)
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"gpu-node[1-3]", "a[1-2]-b[01-10],c", "x[", "[[]]", "n[0-99999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := expandHostlist(expr)
		if err == nil && len(names) > maxHostlistNames {
			t.Fatalf("%q expanded to %d names", expr, len(names))
		}
	})
}
