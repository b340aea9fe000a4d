package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The caps on open faults, as the refused and evicted counters name them.
const (
	capGlobal = "max_open_faults"
	capNode   = "max_open_faults_per_node"
	capSource = "max_open_faults_per_source"
)

// capKeys returns what a fault counts under: its node (host.name, or the
// entity itself for a fault without a host, such as a job's) and its source
// on that node (the id type: the fault type, with the XID code for
// gpu.xid).
func capKeys(r fault.Record) (node, source string) {
	node = r.HostName
	if node == "" {
		node = r.Entity.String()
	}
	return node, node + "\x00" + r.IDType()
}

// openIndex counts the open faults under each cap, so that a full cap is
// found without a pass over every open fault.
type openIndex struct {
	byNode     map[string]map[string]struct{} // node -> keys of its open faults
	bySource   map[string]int
	bySeverity [4]int // by severityRank
}

func newOpenIndex() openIndex {
	return openIndex{byNode: map[string]map[string]struct{}{}, bySource: map[string]int{}}
}

// track adds f, open under key, to c.open and the index. Callers hold c.mu.
func (c *correlator) track(key string, f *openFault) {
	f.node, f.source = capKeys(f.record)
	c.open[key] = f
	keys := c.index.byNode[f.node]
	if keys == nil {
		keys = map[string]struct{}{}
		c.index.byNode[f.node] = keys
	}
	keys[key] = struct{}{}
	c.index.bySource[f.source]++
	if i := severityRank(f.record.Severity); i >= 0 {
		c.index.bySeverity[i]++
	}
}

// untrack removes the fault open under key. Callers hold c.mu.
func (c *correlator) untrack(key string) {
	f, ok := c.open[key]
	if !ok {
		return
	}
	delete(c.open, key)
	if keys := c.index.byNode[f.node]; keys != nil {
		delete(keys, key)
		if len(keys) == 0 {
			delete(c.index.byNode, f.node)
		}
	}
	if c.index.bySource[f.source]--; c.index.bySource[f.source] <= 0 {
		delete(c.index.bySource, f.source)
	}
	if i := severityRank(f.record.Severity); i >= 0 {
		c.index.bySeverity[i]--
	}
}

// setSeverity keeps the index right when an update changes a fault's
// severity. Callers hold c.mu.
func (c *correlator) setSeverity(f *openFault, s fault.Severity) {
	if i := severityRank(f.record.Severity); i >= 0 {
		c.index.bySeverity[i]--
	}
	if i := severityRank(s); i >= 0 {
		c.index.bySeverity[i]++
	}
}

// admit reports whether r may open. Under a full cap, a fault more severe
// than the least severe open one there evicts that one (no record is
// emitted for it: it is no longer tracked, and what downstream did on its
// open stands); otherwise r is refused. Both are counted by cap. Callers
// hold c.mu.
func (c *correlator) admit(r fault.Record) bool {
	node, source := capKeys(r)
	var scope, victim string
	switch {
	case c.index.bySource[source] >= c.cfg.MaxOpenFaultsPerSource:
		scope = capSource
		victim = c.leastSevere(c.index.byNode[node], source)
	case len(c.index.byNode[node]) >= c.cfg.MaxOpenFaultsPerNode:
		scope = capNode
		victim = c.leastSevere(c.index.byNode[node], "")
	case len(c.open) >= c.cfg.MaxOpenFaults:
		scope = capGlobal
		if c.lessSevereOpen(r.Severity) {
			victim = c.leastSevereOfAll()
		}
	default:
		return true
	}
	if victim == "" || severityRank(r.Severity) >= severityRank(c.open[victim].record.Severity) {
		c.dropped++
		c.refusedNow++
		c.telemetry.FaultcorrelatorFaultsRefused.Add(context.Background(), 1, metric.WithAttributes(attribute.String(metadata.TelemetryAttrCap, scope)))
		return false
	}
	old := c.open[victim].record
	c.untrack(victim)
	c.evicted++
	c.telemetry.FaultcorrelatorFaultsEvicted.Add(context.Background(), 1, metric.WithAttributes(attribute.String(metadata.TelemetryAttrCap, scope)))
	c.logger.Warn("faultcorrelator: a cap on open faults is full; evicted a less severe fault",
		zap.String("cap", scope), zap.String("evicted", old.IDType()+" "+old.ID), zap.String("evicted_severity", string(old.Severity)),
		zap.String("for", r.IDType()+" on "+r.Entity.String()), zap.String("severity", string(r.Severity)))
	return true
}

// lessSevereOpen reports whether some open fault is less severe than s.
func (c *correlator) lessSevereOpen(s fault.Severity) bool {
	for i := severityRank(s) + 1; i < len(c.index.bySeverity); i++ {
		if c.index.bySeverity[i] > 0 {
			return true
		}
	}
	return false
}

// leastSevere returns the key of the least severe fault among keys (of
// source, when not empty): the one matched longest ago among equals, then
// the smallest key, so that the choice does not depend on map order.
func (c *correlator) leastSevere(keys map[string]struct{}, source string) string {
	var victim string
	for k := range keys {
		f := c.open[k]
		if source != "" && f.source != source {
			continue
		}
		if victim == "" || lessWorthKeeping(f, k, c.open[victim], victim) {
			victim = k
		}
	}
	return victim
}

// leastSevereOfAll is leastSevere over every open fault: a pass over them,
// made only when a global eviction is due.
func (c *correlator) leastSevereOfAll() string {
	var victim string
	for k, f := range c.open {
		if victim == "" || lessWorthKeeping(f, k, c.open[victim], victim) {
			victim = k
		}
	}
	return victim
}

func lessWorthKeeping(a *openFault, ak string, b *openFault, bk string) bool {
	ra, rb := severityRank(a.record.Severity), severityRank(b.record.Severity)
	if ra != rb {
		return ra > rb
	}
	if !a.lastMatched.Equal(b.lastMatched) {
		return a.lastMatched.Before(b.lastMatched)
	}
	return ak < bk
}
