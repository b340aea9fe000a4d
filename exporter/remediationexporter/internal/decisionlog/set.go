package decisionlog // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"

import "time"

// Decided says who decided a key, and when (the log record's time).
type Decided struct {
	Replica string
	At      time.Time
}

// decidedSet is the set of decided keys, bounded by age and by count. Keys
// are kept in the order they were added (the log's order, near enough to
// time order) so both bounds drop from the front.
type decidedSet struct {
	retention time.Duration
	maxKeys   int
	keys      map[string]Decided
	order     []string
	head      int // order[:head] are gone
	evicted   int64
}

func newDecidedSet(retention time.Duration, maxKeys int) *decidedSet {
	return &decidedSet{retention: retention, maxKeys: maxKeys, keys: map[string]Decided{}}
}

// add records key as decided; the first decision of a key wins. It
// reports whether adding it evicted a key over maxKeys.
func (s *decidedSet) add(key string, d Decided) (evicted bool) {
	if _, ok := s.keys[key]; ok {
		return false
	}
	s.keys[key] = d
	s.order = append(s.order, key)
	for len(s.keys) > s.maxKeys {
		s.dropFront()
		s.evicted++
		evicted = true
	}
	s.compact()
	return evicted
}

func (s *decidedSet) get(key string) (Decided, bool) {
	d, ok := s.keys[key]
	return d, ok
}

// prune drops the keys decided before now - retention: the log no longer
// holds them either, so a replica that starts later would not know them.
func (s *decidedSet) prune(now time.Time) {
	horizon := now.Add(-s.retention)
	for s.head < len(s.order) {
		if d := s.keys[s.order[s.head]]; !d.At.Before(horizon) {
			break
		}
		s.dropFront()
	}
	s.compact()
}

func (s *decidedSet) dropFront() {
	delete(s.keys, s.order[s.head])
	s.order[s.head] = ""
	s.head++
}

// compact reclaims the dropped front once it is half the slice.
func (s *decidedSet) compact() {
	if s.head > 1024 && s.head*2 > len(s.order) {
		s.order = append([]string(nil), s.order[s.head:]...)
		s.head = 0
	}
}

func (s *decidedSet) len() int { return len(s.keys) }
