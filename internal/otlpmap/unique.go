package otlpmap // import "github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"

import (
	"iter"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Unique iterates over m as every reader of this repository reads a map:
// each key once, with its first entry's value, the one m.Get(key) returns.
// On a canonical map it is m.All(). A reader that loops over a map (to
// render its points' signal names, to key a source by its attributes) uses
// it, so that a map with a repeated key that reached it anyway (from a
// Kafka producer rather than an agent's OTLP edge) is read the way
// Map.Get-based readers and the provenance processor read it, never as
// its later entry.
func Unique(m pcommon.Map) iter.Seq2[string, pcommon.Value] {
	return func(yield func(string, pcommon.Value) bool) {
		if m.Len() > smallMap {
			uniqueBig(m, yield)
			return
		}
		var keys [smallMap]string
		i := 0
		m.Range(func(k string, v pcommon.Value) bool {
			for _, prev := range keys[:i] {
				if prev == k {
					return true // a later entry of a key: not its value
				}
			}
			keys[i] = k
			i++
			return yield(k, v)
		})
	}
}

func uniqueBig(m pcommon.Map, yield func(string, pcommon.Value) bool) {
	seen := make(map[string]struct{}, m.Len())
	m.Range(func(k string, v pcommon.Value) bool {
		if _, dup := seen[k]; dup {
			return true
		}
		seen[k] = struct{}{}
		return yield(k, v)
	})
}
