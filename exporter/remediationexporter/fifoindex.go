package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

// fifoIndex is a map that keeps at most limit keys: adding one more
// forgets the key added first. It bounds what the exporter remembers of
// faults for the console.
type fifoIndex[V any] struct {
	limit int
	byID  map[string]V
	order []string // oldest first
}

func newFIFOIndex[V any](limit int) fifoIndex[V] {
	return fifoIndex[V]{limit: limit, byID: map[string]V{}}
}

// put sets id's value; a new id past the limit forgets the oldest.
func (x *fifoIndex[V]) put(id string, v V) {
	if _, ok := x.byID[id]; !ok {
		if len(x.order) >= x.limit {
			delete(x.byID, x.order[0])
			x.order = x.order[1:]
		}
		x.order = append(x.order, id)
	}
	x.byID[id] = v
}
