package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// remembered is the identity remember was last given for an entity of one
// kind (after the coarse kinds' fields are cleared): the same again, as
// from the spans of one host or one job in a row, changes nothing.
type remembered struct {
	entity fault.Entity
	w      where
	ok     bool
}

// rememberSlot returns the slot of c.lastRemembered for kind k.
func rememberSlot(k fault.EntityKind) int {
	switch k {
	case fault.EntityGPU:
		return 0
	case fault.EntityNode:
		return 1
	case fault.EntityIBPort:
		return 2
	case fault.EntityRank:
		return 3
	case fault.EntityJob:
		return 4
	}
	return 5 // any other kind
}

// remember keeps the identity of e; bounded like the evaluator's entities.
func (c *correlator) remember(e fault.Entity, w where) {
	// Coarse entities (node, job) must not carry one GPU's or rank's
	// identity (nor a rank number, which says nothing without rankKnown).
	switch e.Kind {
	case fault.EntityNode, fault.EntityIBPort:
		w.gpu, w.job, w.rank, w.rankKnown = "", "", 0, false
	case fault.EntityJob:
		w.gpu, w.host, w.rank, w.rankKnown = "", "", 0, false
	}
	last := &c.lastRemembered[rememberSlot(e.Kind)]
	if last.ok && last.entity == e && last.w == w {
		return // merging the same identity again keeps what c.info holds
	}
	old, known := c.identity(e)
	if !known && len(c.info) >= c.cfg.MaxEntities {
		return
	}
	*last = remembered{entity: e, w: w, ok: true}
	if w.host == "" {
		w.host = old.host
	}
	if w.gpu == "" {
		w.gpu = old.gpu // a rank's verdict span may not name the GPU its step spans did
	}
	if e.Kind == fault.EntityGPU && w.job == "" && !w.rankKnown {
		// A GPU's metrics name no job: its record keeps the job and rank
		// that the latest span of the GPU named, rather than losing them
		// to every scrape in between.
		w.job, w.rank, w.rankKnown = old.job, old.rank, old.rankKnown
	}
	if known && old == w {
		return // the usual case: a rank's every span says the same
	}
	c.info[e] = w
	c.infoVersion++
}

// identityGeneration is how long an identity is kept after the entity was
// last remembered: one to two generations, at least the evaluator's default
// forget_after (rules.Limits), for which it keeps the entity's samples.
const identityGeneration = time.Hour

// identity returns what e was last remembered as, moving it into the
// current generation. Callers hold c.mu.
func (c *correlator) identity(e fault.Entity) (where, bool) {
	if w, ok := c.info[e]; ok {
		return w, true
	}
	w, ok := c.infoOld[e]
	if ok {
		delete(c.infoOld, e)
		c.info[e] = w
	}
	return w, ok
}

// rotateIdentities starts a new generation once the current one is
// identityGeneration old, dropping the identities not remembered since the
// last rotation. Callers hold c.mu.
func (c *correlator) rotateIdentities(now time.Time) {
	if c.infoRotated.IsZero() {
		c.infoRotated = now
	}
	if now.Sub(c.infoRotated) < identityGeneration {
		return
	}
	c.infoOld, c.info = c.info, make(map[fault.Entity]where, len(c.info))
	c.infoRotated = now
	c.infoVersion++ // what rankState remembered must move to the new generation
	// A repeat of the last identity skips remember's lookup, which is what
	// moves an entity into the new generation.
	c.lastRemembered = [len(c.lastRemembered)]remembered{}
}
