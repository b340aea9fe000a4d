package pickle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDictGet(t *testing.T) {
	d := &Dict{Items: []DictItem{
		{Key: "a", Value: int64(1)},
		{Key: Tuple{"x"}, Value: "tuple key"},
		{Key: int64(1), Value: "int key"},
		{Key: "a", Value: int64(2)}, // set twice: the last wins
		{Key: nil, Value: "none key"},
	}}
	assert.Equal(t, 5, d.Len())

	v, ok := d.Get("a")
	assert.True(t, ok)
	assert.Equal(t, int64(2), v)

	v, ok = d.Get(int64(1))
	assert.True(t, ok)
	assert.Equal(t, "int key", v)

	_, ok = d.Get(1.0) // a float never equals an int key
	assert.False(t, ok)

	_, ok = d.Get(Tuple{"x"}) // tuples are not comparable with ==
	assert.False(t, ok)

	v, ok = d.Get(nil)
	assert.True(t, ok)
	assert.Equal(t, "none key", v)

	_, ok = (&Dict{}).Get("a")
	assert.False(t, ok)
}
