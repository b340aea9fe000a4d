package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"
)

// maxOverBudgetLogsPerBatch bounds the warnings one batch writes when many
// keys go over budget at once; the counter has them all.
const maxOverBudgetLogsPerBatch = 10

// budget is one set of buckets: per key, or per node over all keys.
type budget struct {
	keyAttr string
	rate    float64
	burst   int
	table   *bucketTable
}

func newBudget(keyAttr string, rate float64, burst, maxKeys int) *budget {
	return &budget{keyAttr: keyAttr, rate: rate, burst: burst, table: newBucketTable(rate, burst, maxKeys)}
}

// limiter is one signal's buckets and what it reports about them.
type limiter struct {
	signal string // traces | logs
	key    *budget
	// node is the budget of a node over all its keys; nil: none.
	node *budget
	// reserve: how far below empty protected items may take a bucket.
	reserve   float64
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	now       func() time.Time

	mu sync.Mutex
}

func newLimiter(signal string, key, node *budget, reserve int, logger *zap.Logger, tb *metadata.TelemetryBuilder) *limiter {
	return &limiter{
		signal: signal, key: key, node: node, reserve: float64(reserve),
		logger: logger, telemetry: tb, now: time.Now,
	}
}

// cursor is one budget's state during a Consume call.
type cursor struct {
	b *budget
	// cur is the bucket of the last key seen: items of one resource share
	// a key, so most items skip the map.
	cur *bucket
	// metaKey is the key from client metadata, read at most once a call.
	metaKey    string
	metaLoaded bool
}

// keyOf returns the item's key when its resource has none: the item's own
// attribute, else the client metadata's, else "".
func (c *cursor) keyOf(ctx context.Context, attrs pcommon.Map) string {
	if k, ok := attrKey(attrs, c.b.keyAttr); ok {
		return k
	}
	if !c.metaLoaded {
		c.metaLoaded = true
		for _, v := range client.FromContext(ctx).Metadata.Get(c.b.keyAttr) {
			if v != "" {
				c.metaKey = v
				break
			}
		}
	}
	return c.metaKey
}

// bucket returns key's bucket, refilled to now, and how many buckets were
// evicted to make room.
func (c *cursor) bucket(key string, now int64) (*bucket, int) {
	if c.cur != nil && c.cur.key == key {
		return c.cur, 0
	}
	b, evicted := c.b.table.get(key, now)
	c.cur = b
	return b, evicted
}

// overKey is a bucket whose first drop this is.
type overKey struct {
	key  string
	node bool // the node's budget, not the key's
}

// pass is the bookkeeping of one Consume call. Filled under the limiter's
// lock, reported after it is released.
type pass struct {
	ctx  context.Context
	now  int64
	key  cursor
	node cursor // unused when the limiter has no node budget

	drops     map[string]int64 // by key; nil until something is dropped
	dropped   int64
	protected int64
	evicted   int64
	newlyOver []overKey
}

func (l *limiter) begin(ctx context.Context) *pass {
	p := &pass{ctx: ctx, now: l.now().UnixNano(), key: cursor{b: l.key}}
	if l.node != nil {
		p.node = cursor{b: l.node}
	}
	return p
}

// nodeLabel is the dropped_items key of a drop by the node budget:
// "host.name=node1", told apart from the keys of the per-key budget.
func (l *limiter) nodeLabel(node string) string { return l.node.keyAttr + "=" + node }

// attrKey returns the key attribute's value: a string, or the text of a
// number or bool. Empty strings, maps, slices and bytes count as absent.
func attrKey(attrs pcommon.Map, name string) (string, bool) {
	v, ok := attrs.Get(name)
	if !ok {
		return "", false
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str(), v.Str() != ""
	case pcommon.ValueTypeInt, pcommon.ValueTypeDouble, pcommon.ValueTypeBool:
		return v.AsString(), true
	default:
		return "", false
	}
}

// admit charges one item to key's bucket and, with a node budget, to
// node's; false: drop it. A protected item is charged like any item but
// dropped last: it may run up a debt of up to the reserve, repaid from the
// refill before unprotected items get tokens again. Call with l.mu held.
func (l *limiter) admit(p *pass, key, node string, protected bool) bool {
	kb, evicted := p.key.bucket(key, p.now)
	p.evicted += int64(evicted)
	var nb *bucket
	if l.node != nil {
		nb, evicted = p.node.bucket(node, p.now)
		p.evicted += int64(evicted)
	}
	over, overLabel, overNode := kb, key, false
	switch {
	case !l.can(kb, protected):
	case nb != nil && !l.can(nb, protected):
		if nb.label == "" {
			nb.label = l.nodeLabel(node) // once per bucket, not per drop
		}
		over, overLabel, overNode = nb, nb.label, true
	default:
		l.charge(kb, protected)
		if nb != nil {
			l.charge(nb, protected)
		}
		return true
	}
	if !over.warned {
		over.warned = true
		p.newlyOver = append(p.newlyOver, overKey{key: over.key, node: overNode})
	}
	if p.drops == nil {
		p.drops = map[string]int64{}
	}
	p.drops[overLabel]++
	p.dropped++
	return false
}

func (l *limiter) can(b *bucket, protected bool) bool {
	if protected {
		return b.canProtected(l.reserve)
	}
	return b.tokens >= 1
}

func (l *limiter) charge(b *bucket, protected bool) {
	if protected {
		b.takeProtected(l.reserve)
		return
	}
	b.take()
}

// finish reports the pass: counters, and a warning per key newly over
// budget. Call without l.mu.
func (l *limiter) finish(p *pass) {
	sig := attribute.String(metadata.TelemetryAttrSignal, l.signal)
	for key, n := range p.drops {
		l.telemetry.DroppedItems.Add(p.ctx, n, metric.WithAttributes(sig, attribute.String(metadata.TelemetryAttrKey, key)))
	}
	if p.protected > 0 {
		l.telemetry.ProtectedItems.Add(p.ctx, p.protected, metric.WithAttributes(sig))
	}
	if p.evicted > 0 {
		l.telemetry.EvictedKeys.Add(p.ctx, p.evicted, metric.WithAttributes(sig))
	}
	for i, over := range p.newlyOver {
		if i == maxOverBudgetLogsPerBatch {
			l.logger.Warn(fmt.Sprintf("ratelimitprocessor: %d more keys over budget in this batch", len(p.newlyOver)-i),
				zap.String("signal", l.signal))
			break
		}
		if over.node {
			l.logger.Warn("ratelimitprocessor: node over its budget for all keys together, dropping its excess (logged once per node)",
				zap.String("signal", l.signal), zap.String("node_attribute", l.node.keyAttr), zap.String("node", over.key),
				zap.Float64("per_second", l.node.rate), zap.Int("burst", l.node.burst))
			continue
		}
		l.logger.Warn("ratelimitprocessor: key over budget, dropping its excess (logged once per key)",
			zap.String("signal", l.signal), zap.String("key_attribute", l.key.keyAttr), zap.String("key", over.key),
			zap.Float64("per_second", l.key.rate), zap.Int("burst", l.key.burst))
	}
}
