package rules

import "strings"

// textTable interns the texts of kept samples (straggler.verdict values,
// finding kinds, throttle reasons) so that a point holds a small id instead
// of a string. Points then hold no pointer: the garbage collector does not
// scan the series (a gateway keeps millions of samples), and expiring a
// sample needs no clearing. Ids are counted per kept sample and freed with
// the last one, so the table holds only the texts of samples still kept.
// Id 0 is the empty text (a numeric sample). Guarded by Evaluator.mu.
type textTable struct {
	ids   map[string]uint32
	texts []string // by id
	refs  []int32  // kept samples per id
	free  []uint32 // ids to reuse
}

func newTextTable() textTable {
	return textTable{ids: map[string]uint32{}, texts: []string{""}, refs: []int32{0}}
}

// intern returns the id of s for one more kept sample.
func (t *textTable) intern(s string) uint32 {
	if s == "" {
		return 0
	}
	if id, ok := t.ids[s]; ok {
		t.refs[id]++
		return id
	}
	// A sample's text may point into a decoded batch: keep a copy.
	s = strings.Clone(s)
	var id uint32
	if n := len(t.free); n > 0 {
		id, t.free = t.free[n-1], t.free[:n-1]
		t.texts[id], t.refs[id] = s, 1
	} else {
		id = uint32(len(t.texts))
		t.texts, t.refs = append(t.texts, s), append(t.refs, 1)
	}
	t.ids[s] = id
	return id
}

// release drops one kept sample of id.
func (t *textTable) release(id uint32) {
	if id == 0 {
		return
	}
	if t.refs[id]--; t.refs[id] > 0 {
		return
	}
	delete(t.ids, t.texts[id])
	t.texts[id] = ""
	t.free = append(t.free, id)
}

// text returns the text of id.
func (t *textTable) text(id uint32) string { return t.texts[id] }

// len returns how many texts are held.
func (t *textTable) len() int { return len(t.ids) }
