package analysis

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseMs(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return v
}

func TestFormatPythonValues(t *testing.T) {
	assert.Equal(t, "{}", rankSet(nil))
	assert.Equal(t, "{0, 1, 3}", rankSet([]int{0, 1, 3}))
	assert.Equal(t, "[[3, 4], [5]]", pySizes([][]int64{{3, 4}, {5}}))
	assert.Equal(t, "[]", pySizes(nil))
	assert.Equal(t, "['Float', 'BFloat16']", pyStrings([]string{"Float", "BFloat16"}))
	assert.Equal(t, "0:default_pg", groupInfo("0", "default_pg"))
	assert.Equal(t, "3", groupInfo("3", ""))
	assert.Equal(t, "152.123", ms(152123456))
}

func TestFormatByValue(t *testing.T) {
	assert.Equal(t, "ranks {0, 1, 3}: 19; rank 2: 16", byValue([]int{0, 1, 2, 3}, []string{"19", "19", "16", "19"}))
	assert.Equal(t, "ranks {0, 1}: a", byValue([]int{0, 1}, []string{"a", "a"}))
	assert.Equal(t, "a", sameOrByValue([]int{0, 1}, []string{"a", "a"}))
	assert.Equal(t, "rank 0: a; rank 1: b", sameOrByValue([]int{0, 1}, []string{"a", "b"}))
	assert.Empty(t, sameOrByValue(nil, nil))
}

func TestFormatSeqRanges(t *testing.T) {
	assert.Equal(t, "18-19", seqRanges([]int64{18, 19}))
	assert.Equal(t, "3, 5-7, 9", seqRanges([]int64{3, 5, 6, 7, 9}))
	assert.Empty(t, seqRanges(nil))
	assert.Equal(t, "rank.2.state", rankKey(2, "state"))
}
