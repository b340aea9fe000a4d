package otlpmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

// Unique reads each key once with the value Map.Get returns; on a
// canonical map it is All.
func TestUniqueReadsWhatGetReads(t *testing.T) {
	for _, n := range []int{3, smallMap, 3 * smallMap} {
		m := otlpmaptest.Map(func(m pcommon.Map) {
			withKeys(m, n)
			m.PutStr(rep("k1"), "second")
			m.PutStr(rep("k1"), "third")
			m.PutStr(rep("k2"), "second")
		})
		seen := map[string]int{}
		for k, v := range Unique(m) {
			seen[k]++
			got, _ := m.Get(k)
			assert.Equal(t, got.AsString(), v.AsString(), "key %s of a %d-key map", k, n)
		}
		assert.Len(t, seen, n)
		for k, c := range seen {
			assert.Equal(t, 1, c, k)
		}

		canonical := pcommon.NewMap()
		withKeys(canonical, n)
		var all, unique []string
		for k := range canonical.All() {
			all = append(all, k)
		}
		for k := range Unique(canonical) {
			unique = append(unique, k)
		}
		assert.Equal(t, all, unique)
	}
	// Stopping early stops.
	m := pcommon.NewMap()
	withKeys(m, 5)
	n := 0
	for range Unique(m) {
		n++
		break
	}
	assert.Equal(t, 1, n)
}
