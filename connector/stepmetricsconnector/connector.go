package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/periodic"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

type stepMetrics struct {
	cfg       *Config
	logger    *zap.Logger
	next      consumer.Metrics
	telemetry *metadata.TelemetryBuilder
	version   string
	now       func() time.Time
	bounds    []float64 // Buckets in seconds

	mu    sync.Mutex
	jobs  map[jobKey]*jobState
	peaks *peakTable // its cache is guarded by mu
	// Counts since the last emission, reported to the telemetry then.
	drops  [numDropReasons]int64
	closes [numCloseReasons]int64
	skips  map[skipKey]int64 // keys from a fixed set of attributes and reasons
	// Method values made once: passing c.skip directly would allocate a
	// closure per span.
	skipFn   func(attribute, reason string)
	closedFn func(closeReason)

	loop periodic.Loop // the background flush, emission or evaluation
}

func newStepMetrics(cfg *Config, set connector.Settings, next consumer.Metrics) (*stepMetrics, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("stepmetricsconnector: creating the telemetry: %w", err)
	}
	c := &stepMetrics{
		cfg:       cfg,
		logger:    set.Logger,
		next:      next,
		telemetry: tel,
		version:   set.BuildInfo.Version,
		now:       time.Now,
		jobs:      map[jobKey]*jobState{},
		peaks:     newPeakTable(cfg.PeakFLOPS),
		skips:     map[skipKey]int64{},
	}
	for _, b := range cfg.Buckets {
		c.bounds = append(c.bounds, b.Seconds())
	}
	c.skipFn = c.skip
	c.closedFn = c.closed
	return c, nil
}

func (c *stepMetrics) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// Start emits the metrics every interval until Shutdown.
func (c *stepMetrics) Start(context.Context, component.Host) error {
	c.loop.Start(c.cfg.Interval, func(ctx context.Context) { c.emit(ctx, false) })
	return nil
}

// Shutdown closes every open step and emits one last time, for at most
// periodic.FinalFlushTimeout: with Prometheus down, the remote-write
// exporter retries until its context ends, and the collector's own
// context never does.
func (c *stepMetrics) Shutdown(ctx context.Context) error {
	c.loop.StopAndFlush(ctx, func(ctx context.Context) { c.emit(ctx, true) })
	return nil
}

// ConsumeTraces folds the train.step spans into the jobs' state; every
// other span is ignored.
func (c *stepMetrics) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stepmetricsconnector: consuming traces: %w", err)
	}
	now := c.now()
	maxRanks := int64(c.cfg.MaxRanks)
	c.mu.Lock()
	defer c.mu.Unlock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		res := rss.At(i).Resource().Attributes()
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				if span.Name() != semconv.SpanTrainStep {
					continue
				}
				r, reason, ok := readRecord(span, res, maxRanks, c.peaks, c.skipFn)
				if ok {
					reason, ok = c.add(&r, now)
				}
				if !ok {
					c.drops[reason]++
				}
			}
		}
	}
	return nil
}

// add folds a record into its job attempt's state. The caller holds mu.
func (c *stepMetrics) add(r *stepRecord, now time.Time) (dropReason, bool) {
	key := jobKey{job: r.job, attempt: r.attempt}
	j := c.jobs[key]
	if j == nil {
		if len(c.jobs) >= c.cfg.MaxJobs {
			return dropTooManyJobs, false
		}
		j = newJobState(now, len(c.bounds))
		c.jobs[key] = j
	}
	return j.add(r, now, c.cfg.MaxOpenSteps, c.bounds, c.closedFn)
}

func (c *stepMetrics) skip(attribute, reason string) {
	c.skips[skipKey{attribute: attribute, reason: reason}]++
}

func (c *stepMetrics) closed(reason closeReason) {
	c.closes[reason]++
}

// emit closes the steps that are due, sends the metrics of every job
// attempt, and reports the counts of the interval to the telemetry.
func (c *stepMetrics) emit(ctx context.Context, final bool) {
	now := c.now()
	c.mu.Lock()
	md := c.collect(now, final)
	drops, closes, skips := c.drops, c.closes, c.skips
	c.drops, c.closes, c.skips = [numDropReasons]int64{}, [numCloseReasons]int64{}, map[skipKey]int64{}
	c.mu.Unlock()

	c.report(ctx, drops, closes, skips)
	if md.DataPointCount() == 0 {
		return
	}
	if err := c.next.ConsumeMetrics(ctx, md); err != nil {
		c.logger.Warn("stepmetricsconnector: emitting: metrics refused downstream",
			zap.Int("data_points", md.DataPointCount()), zap.Error(err))
	}
}

// report adds the interval's counts to the telemetry and logs the drops.
func (c *stepMetrics) report(ctx context.Context, drops [numDropReasons]int64, closes [numCloseReasons]int64, skips map[skipKey]int64) {
	var dropped []zap.Field
	for reason, n := range drops {
		if n > 0 {
			name := dropReasonNames[reason]
			c.telemetry.StepmetricsSpansDropped.Add(ctx, n, metric.WithAttributes(attribute.String(metadata.TelemetryAttrReason, name)))
			dropped = append(dropped, zap.Int64(name, n))
		}
	}
	if len(dropped) > 0 {
		c.logger.Warn("stepmetricsconnector: train.step spans dropped in the interval", dropped...)
	}
	for reason, n := range closes {
		if n > 0 {
			c.telemetry.StepmetricsStepsClosed.Add(ctx, n, metric.WithAttributes(attribute.String(metadata.TelemetryAttrReason, closeReasonNames[reason])))
		}
	}
	keys := make([]skipKey, 0, len(skips))
	for k := range skips {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		return keys[a].attribute < keys[b].attribute || keys[a].attribute == keys[b].attribute && keys[a].reason < keys[b].reason
	})
	for _, k := range keys {
		c.telemetry.StepmetricsAttributesSkipped.Add(ctx, skips[k], metric.WithAttributes(
			attribute.String(metadata.TelemetryAttrAttribute, k.attribute), attribute.String(metadata.TelemetryAttrReason, k.reason)))
		c.logger.Debug("stepmetricsconnector: attributes of train.step spans ignored",
			zap.String("attribute", k.attribute), zap.String("reason", k.reason), zap.Int64("count", skips[k]))
	}
}
