package decisionlog // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
)

// Decision is one message of the log (its JSON value; the Kafka key is the
// fault id, so one fault's decisions stay in order on one partition).
type Decision struct {
	// Key is what makes a new decision: see the exporter's decisionKey.
	Key     string    `json:"decision.key"`
	FaultID string    `json:"fault.id"`
	Replica string    `json:"replica"`
	Time    time.Time `json:"time"`
	// Entries are the audit entries of the decision, as the deciding
	// replica wrote them to its audit file after publishing.
	Entries []audit.Entry `json:"entries"`
}

// Options configure a Log.
type Options struct {
	Client configkafka.ClientConfig
	Topic  string
	// Retention: keys decided longer ago are forgotten (the topic's
	// retention.ms). MaxKeys bounds the set; past it the oldest go.
	Retention time.Duration
	MaxKeys   int
	// Timeout bounds one Publish (the record's delivery timeout).
	Timeout time.Duration
	Logger  *zap.Logger
	// Host gives SASL OAUTHBEARER its token extension once the exporter
	// has started (nil: none).
	Host *kafkaclient.Host
	// Extra franz-go options (tests).
	Extra []kgo.Opt
}

// Log reads and appends the decision log. Safe for concurrent use; calls
// are serialised.
type Log struct {
	cl     *kgo.Client
	topic  string
	logger *zap.Logger

	mu         sync.Mutex
	next       map[int32]int64 // next offset to read, per partition
	set        *decidedSet
	warnedFull bool
}

// New builds the client; it connects on first use.
func New(ctx context.Context, o Options) (*Log, error) {
	opts, err := kafkaclient.Options(ctx, o.Client, o.Host, nil)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.DefaultProduceTopic(o.Topic),
		// Every replica reads the whole log, outside any group.
		kgo.ConsumeTopics(o.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A decision counts once all in-sync replicas have it; the
		// idempotent producer (franz-go's default) keeps a retried
		// produce from writing it twice.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(o.Timeout),
		kgo.ProducerLinger(0),
		// The first decision creates the topic where the broker allows it;
		// production creates it with its retention (README.md).
		kgo.AllowAutoTopicCreation(),
	)
	opts = append(opts, o.Extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &Log{cl: cl, topic: o.Topic, logger: o.Logger, next: map[int32]int64{},
		set: newDecidedSet(o.Retention, o.MaxKeys)}, nil
}

// Close closes the client.
func (l *Log) Close() { l.cl.Close() }

// Lookup says whether key is decided, and by whom.
func (l *Log) Lookup(key string) (Decided, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.set.get(key)
}

// Len is the number of keys remembered; Evicted how many were dropped over
// MaxKeys before their retention.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.set.len()
}

func (l *Log) Evicted() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.set.evicted
}

// CatchUp reads the log up to its current end and returns the decisions
// it read that it had not read before (the caller restores its state from
// them). now bounds the set by the retention.
func (l *Log) CatchUp(ctx context.Context, now time.Time) ([]Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set.prune(now)
	ends, err := l.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.skipDeleted(ctx, ends); err != nil {
		return nil, err
	}
	var out []Decision
	for !l.caughtUp(ends) {
		fs := l.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("decision log %s: catching up: %w", l.topic, err)
		}
		if fs.IsClientClosed() {
			return out, fmt.Errorf("decision log %s: client closed", l.topic)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			// franz-go retries what is retriable itself; anything it hands
			// back stops this catch-up, and the record is redelivered.
			ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", p, err))
		})
		if ferr != nil {
			return out, fmt.Errorf("decision log %s: fetch: %w", l.topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if next, ok := l.next[r.Partition]; ok && r.Offset < next {
				return // read already (our own, published after a catch-up)
			}
			l.next[r.Partition] = r.Offset + 1
			var d Decision
			if err := json.Unmarshal(r.Value, &d); err != nil || d.Key == "" {
				l.logger.Warn("decision log: record is not a decision, skipped", zap.String("topic", l.topic),
					zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset))
				return
			}
			if d.Time.IsZero() {
				d.Time = r.Timestamp
			}
			if d.Time.Before(now.Add(-l.set.retention)) {
				return // older than the retention: forgotten, as by the broker
			}
			if _, seen := l.set.get(d.Key); !seen {
				out = append(out, d)
			}
			l.add(d)
		})
	}
	for p, end := range ends {
		if _, ok := l.next[p]; !ok {
			l.next[p] = end // empty so far: Publish can tell its record is next
		}
	}
	return out, nil
}

// caughtUp: every partition read up to its end.
func (l *Log) caughtUp(ends map[int32]int64) bool {
	for p, end := range ends {
		if l.next[p] < end {
			return false
		}
	}
	return true
}

// add records d in the set. Callers hold l.mu.
func (l *Log) add(d Decision) {
	if l.set.add(d.Key, Decided{Replica: d.Replica, At: d.Time}) && !l.warnedFull {
		l.warnedFull = true
		l.logger.Warn("decision log: more decided keys within the retention than max_keys; the oldest are forgotten, and a redelivery of one of them is decided again",
			zap.String("topic", l.topic), zap.Int("max_keys", l.set.maxKeys))
	}
}

// Publish appends d (key: its fault id) and waits until the brokers have
// it (acks=all). Then the key is decided here too.
func (l *Log) Publish(ctx context.Context, d Decision) error {
	value, err := json.Marshal(d)
	if err != nil {
		return err
	}
	// No Timestamp: franz-go times the delivery from it; d.Time is in
	// the value.
	rec := &kgo.Record{Topic: l.topic, Key: []byte(d.FaultID), Value: value}
	if err := l.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("decision log %s: publish %s: %w", l.topic, d.Key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// When it directly follows what was read, the next catch-up need not
	// read it back.
	if next, ok := l.next[rec.Partition]; ok && next == rec.Offset {
		l.next[rec.Partition] = rec.Offset + 1
	}
	l.add(d)
	return nil
}

// endOffsets asks the partition leaders for the high watermarks of the
// topic: one round trip (the partitions come from cached metadata). A
// topic that does not exist yet is empty.
func (l *Log) endOffsets(ctx context.Context) (map[int32]int64, error) {
	return l.listOffsets(ctx, nil, -1)
}

// skipDeleted moves the read position of partitions never read past what
// the retention deleted, so a partition whose records are all gone counts
// as read. Only asked while such a partition lags.
func (l *Log) skipDeleted(ctx context.Context, ends map[int32]int64) error {
	var unread []int32
	for p, end := range ends {
		if _, ok := l.next[p]; !ok && end > 0 {
			unread = append(unread, p)
		}
	}
	if len(unread) == 0 {
		return nil
	}
	starts, err := l.listOffsets(ctx, unread, -2)
	if err != nil {
		return err
	}
	for p, start := range starts {
		if _, ok := l.next[p]; !ok && start > 0 {
			l.next[p] = start
		}
	}
	return nil
}

// listOffsets lists the offsets at timestamp ts (-1 latest, -2 earliest)
// of partitions (nil: all of the topic's).
func (l *Log) listOffsets(ctx context.Context, partitions []int32, ts int64) (map[int32]int64, error) {
	if partitions == nil {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(l.topic)
		mreq.Topics = append(mreq.Topics, mt)
		meta, err := l.cl.RequestCachedMetadata(ctx, mreq, time.Minute)
		if err != nil {
			return nil, fmt.Errorf("decision log %s: metadata: %w", l.topic, err)
		}
		for _, t := range meta.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return map[int32]int64{}, nil // nothing decided yet
				}
				return nil, fmt.Errorf("decision log %s: metadata: %w", l.topic, err)
			}
			for _, p := range t.Partitions {
				partitions = append(partitions, p.Partition)
			}
		}
	}
	out := make(map[int32]int64, len(partitions))
	if len(partitions) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = l.topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := l.cl.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("decision log %s: list offsets: %w", l.topic, err)
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("decision log %s: list offsets, partition %d: %w", l.topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}
