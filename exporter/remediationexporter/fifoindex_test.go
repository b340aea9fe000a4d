package remediationexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFIFOIndexForgetsTheOldest(t *testing.T) {
	x := newFIFOIndex[int](2)
	x.put("a", 1)
	x.put("b", 2)
	x.put("a", 3) // an update keeps its place
	x.put("c", 4)
	assert.Equal(t, map[string]int{"b": 2, "c": 4}, x.byID)
	assert.Equal(t, []string{"b", "c"}, x.order)
}
