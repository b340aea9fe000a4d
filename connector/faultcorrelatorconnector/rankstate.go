package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// jobRank keys the span path's state of a rank (correlator.ranks).
type jobRank struct {
	job  string
	rank int64
}

// rankState is what the span path keeps of a rank between its spans. A
// gateway sees every rank's step span every step, and each says what the
// last one said: the rank's key, and its entities, resolved in the
// evaluator for the identity (w) its last step span gave, let the next one
// skip building the key and looking up the entities; remembered lets it
// skip remember's identity lookups. On a gateway with thousands of ranks
// those lookups are cache misses, the span path's main cost.
type rankState struct {
	key   string
	w     where // the identity refs were built for
	refs  [maxEntitiesPerInput]rules.EntityRef
	nrefs int
	rank  int // index of the rank entity in refs
	// remembered: bit i set when remember merged w into refs[i]'s identity
	// while c.info was at version infoVersion. remember is idempotent, so
	// until info changes again it would change nothing.
	remembered  uint8
	infoVersion uint64
	// sendsSteps: a train.step span of the rank arrived (its collective
	// spans alone, from the flight recorder, do not set it): read for
	// nccl.finding.step_spans.
	sendsSteps bool
}

// rankStateOf returns job's rank's state, created while c.ranks has room.
// Callers hold c.mu.
func (c *correlator) rankStateOf(job string, rank int64) *rankState {
	jr := jobRank{job, rank}
	if rs, ok := c.ranks[jr]; ok {
		return rs
	}
	if len(c.ranks) >= c.cfg.MaxEntities {
		clear(c.ranks)
	}
	rs := &rankState{key: rankKey(job, rank)}
	// The job string may point into a decoded batch: the key holds a copy.
	c.ranks[jobRank{strings.Clone(job), rank}] = rs
	return rs
}

// entitiesFor makes rs's entities those of w, as the rank's latest step
// span gave it, unless they already are.
func (rs *rankState) entitiesFor(w where) {
	if rs.nrefs > 0 && rs.w == w {
		return
	}
	var ents [maxEntitiesPerInput]fault.Entity
	rs.nrefs = 0
	for i, e := range w.entitiesInto(ents[:0], rs.key) {
		rs.refs[i] = rules.EntityRef{Entity: e}
		if e.Kind == fault.EntityRank {
			rs.rank = i
		}
		rs.nrefs++
	}
	rs.w, rs.remembered = w, 0
}

// rememberRef is remember(rs.refs[i].Entity, rs.w) unless it was done since
// c.info last changed.
func (c *correlator) rememberRef(rs *rankState, i int) {
	if rs.infoVersion != c.infoVersion {
		rs.remembered, rs.infoVersion = 0, c.infoVersion
	}
	if rs.remembered&(1<<i) != 0 {
		return
	}
	c.remember(rs.refs[i].Entity, rs.w)
	// Its own write changed info: what rs remembered still holds.
	rs.remembered, rs.infoVersion = rs.remembered|1<<i, c.infoVersion
}
