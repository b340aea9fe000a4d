package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

// arena hands out slices of chunks of at least min items. take(0) before
// any chunk was made returns nil, after it an empty slice: which empty
// lists are nil depends on the takes before, never on min.
type arena[T any] struct {
	chunk []T
	next  int
	min   int
}

func (a *arena[T]) take(n int) []T {
	if len(a.chunk)-a.next < n {
		a.chunk, a.next = make([]T, max(a.min, n)), 0
	}
	s := a.chunk[a.next : a.next+n : a.next+n]
	a.next += n
	return s
}

// reset gives the chunk back for reuse, cleared so that it keeps nothing
// alive.
func (a *arena[T]) reset() {
	clear(a.chunk[:a.next])
	a.next = 0
}
