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

// limiter is one signal's buckets and what it reports about them.
type limiter struct {
	signal    string // traces | logs
	keyAttr   string
	rate      float64
	burst     int
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	now       func() time.Time

	mu    sync.Mutex
	table *bucketTable
}

func newLimiter(signal, keyAttr string, rate float64, burst, maxKeys int, logger *zap.Logger, tb *metadata.TelemetryBuilder) *limiter {
	return &limiter{
		signal: signal, keyAttr: keyAttr, rate: rate, burst: burst,
		logger: logger, telemetry: tb, now: time.Now,
		table: newBucketTable(rate, burst, maxKeys),
	}
}

// pass is the bookkeeping of one Consume call. Filled under the limiter's
// lock, reported after it is released.
type pass struct {
	ctx     context.Context
	keyAttr string
	now     int64
	// cur is the bucket of the last key seen: items of one resource share
	// a key, so most items skip the map.
	cur *bucket
	// metaKey is the key from client metadata, read at most once a call.
	metaKey    string
	metaLoaded bool

	drops     map[string]int64 // by key; nil until something is dropped
	dropped   int64
	protected int64
	evicted   int64
	newlyOver []string // keys whose first drop this is
}

func (l *limiter) begin(ctx context.Context) *pass {
	return &pass{ctx: ctx, keyAttr: l.keyAttr, now: l.now().UnixNano()}
}

// keyOf returns the item's key when its resource has none: the item's own
// attribute, else the client metadata's, else "".
func (p *pass) keyOf(attrs pcommon.Map) string {
	if k, ok := attrKey(attrs, p.keyAttr); ok {
		return k
	}
	if !p.metaLoaded {
		p.metaLoaded = true
		for _, v := range client.FromContext(p.ctx).Metadata.Get(p.keyAttr) {
			if v != "" {
				p.metaKey = v
				break
			}
		}
	}
	return p.metaKey
}

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

// admit charges one item to key's bucket; false: drop it. Call with l.mu
// held.
func (l *limiter) admit(p *pass, key string) bool {
	if p.cur == nil || p.cur.key != key {
		b, evicted := l.table.get(key, p.now)
		p.cur = b
		p.evicted += int64(evicted)
	}
	if p.cur.take() {
		return true
	}
	if !p.cur.warned {
		p.cur.warned = true
		p.newlyOver = append(p.newlyOver, key)
	}
	if p.drops == nil {
		p.drops = map[string]int64{}
	}
	p.drops[key]++
	p.dropped++
	return false
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
	for i, key := range p.newlyOver {
		if i == maxOverBudgetLogsPerBatch {
			l.logger.Warn(fmt.Sprintf("ratelimitprocessor: %d more keys over budget in this batch", len(p.newlyOver)-i),
				zap.String("signal", l.signal))
			break
		}
		l.logger.Warn("ratelimitprocessor: key over budget, dropping its excess (logged once per key)",
			zap.String("signal", l.signal), zap.String("key_attribute", l.keyAttr), zap.String("key", key),
			zap.Float64("per_second", l.rate), zap.Int("burst", l.burst))
	}
}
