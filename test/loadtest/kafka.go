package loadtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is an in-process Kafka-protocol broker (kfake) with the pipeline's
// topics, and a client to fill it and to read consumer groups' progress.
type Broker struct {
	cluster    *kfake.Cluster
	client     *kgo.Client
	partitions int32
	Addr       string
}

// StartBroker starts kfake with the four topics of docs/architecture.md.
func StartBroker(partitions int) (*Broker, error) {
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), TopicSpans, TopicMetrics, TopicLogs, TopicFaults),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": "1048588"}),
	)
	if err != nil {
		return nil, fmt.Errorf("loadtest: kfake: %w", err)
	}
	addr := cluster.ListenAddrs()[0]
	client, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		// As the agent's kafka exporter: lz4, all replicas, keyed partitioning.
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchMaxBytes(1_000_000),
		kgo.MaxBufferedRecords(20_000),
	)
	if err != nil {
		cluster.Close()
		return nil, fmt.Errorf("loadtest: kafka client: %w", err)
	}
	return &Broker{cluster: cluster, client: client, partitions: int32(partitions), Addr: addr}, nil
}

// ConnectBroker returns a Broker for a running Kafka-protocol broker (the
// end-to-end tests' kfakebroker): Lag and Producer work, nothing is started.
func ConnectBroker(addr string, partitions int) (*Broker, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, fmt.Errorf("loadtest: kafka client: %w", err)
	}
	return &Broker{client: client, partitions: int32(partitions), Addr: addr}, nil
}

// Close stops the client and the broker it started, if any.
func (b *Broker) Close() {
	b.client.Close()
	if b.cluster != nil {
		b.cluster.Close()
	}
}

// Producer returns an emit function for the generators and a flush that
// waits for every record and returns the first error.
func (b *Broker) Producer(ctx context.Context) (emit func(*kgo.Record) error, flush func() error) {
	errCh := make(chan error, 1)
	emit = func(r *kgo.Record) error {
		select {
		case err := <-errCh:
			return err
		default:
		}
		b.client.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errCh <- err:
				default:
				}
			}
		})
		return nil
	}
	flush = func() error {
		if err := b.client.Flush(ctx); err != nil {
			return err
		}
		select {
		case err := <-errCh:
			return fmt.Errorf("loadtest: producing: %w", err)
		default:
			return nil
		}
	}
	return emit, flush
}

// GroupTopic is one consumer group reading one topic.
type GroupTopic struct{ Group, Topic string }

// Lag is the sum over partitions of end offset minus committed offset (a
// partition without a commit counts from 0), per group and topic.
func (b *Broker) Lag(ctx context.Context, gts []GroupTopic) (map[GroupTopic]int64, error) {
	ends, err := b.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	out := map[GroupTopic]int64{}
	for _, gt := range gts {
		committed, err := b.committed(ctx, gt)
		if err != nil {
			return nil, err
		}
		var lag int64
		for p, end := range ends[gt.Topic] {
			lag += end - max(committed[p], 0)
		}
		out[gt] = lag
	}
	return out, nil
}

// TotalLag sums Lag over gts.
func TotalLag(lags map[GroupTopic]int64) int64 {
	var n int64
	for _, l := range lags {
		n += l
	}
	return n
}

// FormatLag lists the groups that still lag, for an error message.
func FormatLag(lags map[GroupTopic]int64) string {
	var parts []string
	for gt, l := range lags {
		if l > 0 {
			parts = append(parts, fmt.Sprintf("%s/%s=%d", gt.Group, gt.Topic, l))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (b *Broker) endOffsets(ctx context.Context) (map[string]map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, topic := range []string{TopicSpans, TopicMetrics, TopicLogs, TopicFaults} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := int32(0); p < b.partitions; p++ {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rp.Timestamp = -1 // latest
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, b.client)
	if err != nil {
		return nil, fmt.Errorf("loadtest: list offsets: %w", err)
	}
	out := map[string]map[int32]int64{}
	for _, t := range resp.Topics {
		out[t.Topic] = map[int32]int64{}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("loadtest: list offsets %s/%d: %w", t.Topic, p.Partition, err)
			}
			out[t.Topic][p.Partition] = p.Offset
		}
	}
	return out, nil
}

// committed returns the group's committed offset per partition of the
// topic (-1: none).
func (b *Broker) committed(ctx context.Context, gt GroupTopic) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = gt.Group
	t := kmsg.NewOffsetFetchRequestGroupTopic()
	t.Topic = gt.Topic
	for p := int32(0); p < b.partitions; p++ {
		t.Partitions = append(t.Partitions, p)
	}
	g.Topics = append(g.Topics, t)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, b.client)
	if err != nil {
		return nil, fmt.Errorf("loadtest: offset fetch %s: %w", gt.Group, err)
	}
	out := map[int32]int64{}
	for _, rg := range resp.Groups {
		if err := kerr.ErrorForCode(rg.ErrorCode); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("loadtest: offset fetch %s: %w", gt.Group, err)
		}
		for _, rt := range rg.Topics {
			for _, p := range rt.Partitions {
				out[p.Partition] = p.Offset
			}
		}
	}
	for _, rt := range resp.Topics { // brokers answering v0-v7
		for _, p := range rt.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}
