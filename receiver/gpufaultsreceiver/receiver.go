package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/hostname"
	"github.com/otelcol-gpu/otelcol-gpu/internal/kafkaclient"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

// maxPollRecords bounds one poll; the rebalance waits for the batch.
const maxPollRecords = 100

// shutdownWait bounds each of Shutdown's two waits: for the record in flight
// to return, and for the group to be left. The collector's context never
// ends, and neither wait may hold the process when the next consumer
// ignores its context or Kafka is unreachable (issue 29).
const shutdownWait = 5 * time.Second

type gpuFaultsReceiver struct {
	id       component.ID
	cfg      *Config
	logger   *zap.Logger
	tb       *metadata.TelemetryBuilder
	router   *router
	balancer *singleOwnerBalancer

	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	// wait is shutdownWait (tests shorten it).
	wait time.Duration

	mu    sync.Mutex
	owned map[string]map[int32]struct{} // partitions assigned now
	// joined: an assignment arrived and was not revoked since; generation
	// is its group generation.
	joined     bool
	generation int32
	// withdraw takes this receiver's Election back from the election
	// extension it offered it to at Start (nil: not offered).
	withdraw func()
}

var _ ownership.Election = (*gpuFaultsReceiver)(nil)

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Logs) (*gpuFaultsReceiver, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("gpufaultsreceiver: telemetry: %w", err)
	}
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: set.ID, Transport: "kafka", ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, fmt.Errorf("gpufaultsreceiver: telemetry: %w", err)
	}
	name := cfg.MemberName
	if name == "" {
		if name, err = hostname.Resolve(""); err != nil {
			return nil, fmt.Errorf("gpufaultsreceiver: member_name is empty and %w: set member_name", err)
		}
	}
	r := &gpuFaultsReceiver{
		id:       set.ID,
		cfg:      cfg,
		logger:   set.Logger,
		tb:       tb,
		router:   &router{next: next, obs: obs, tb: tb, logger: set.Logger},
		balancer: &singleOwnerBalancer{self: ownership.Member{Name: name, Console: cfg.ConsoleURL}},
		owned:    map[string]map[int32]struct{}{},
		wait:     shutdownWait,
	}
	return r, nil
}

// Status implements ownership.Election: owner while this member holds
// partitions, standby once an assignment gave it none (naming the owner the
// group leader wrote into it), electing before the first assignment and
// between a revocation and the next one.
func (r *gpuFaultsReceiver) Status() ownership.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := ownership.Status{Role: ownership.RoleElecting, Self: r.balancer.self, Group: r.cfg.GroupID, Generation: r.generation}
	switch {
	case !r.joined:
	case r.countOwned() > 0:
		st.Role, st.Owner = ownership.RoleOwner, r.balancer.self
	default:
		st.Role = ownership.RoleStandby
		if o := r.balancer.owner.Load(); o != nil {
			st.Owner = *o
		}
	}
	return st
}

// Start offers this receiver's election to the collector's election
// extension (the remediation exporter follows it there), then joins the
// group. Without the extension it fails: the group elects the one replica
// that acts, and a collector that could not tell its remediation exporter
// would act on every replica.
func (r *gpuFaultsReceiver) Start(ctx context.Context, host component.Host) error {
	_, seam, err := ownership.FromHost(host)
	if err != nil {
		return fmt.Errorf("gpufaultsreceiver: %w", err)
	}
	if seam == nil {
		return fmt.Errorf("gpufaultsreceiver: no %q extension: the gpu_faults consumer group elects the one replica whose remediation exporter acts, and the election reaches it through that extension; add %q under extensions and to service::extensions (distributions/gateway/config.yaml)",
			ownership.ExtensionType, ownership.ExtensionType)
	}
	if r.withdraw, err = seam.Offer(r.id, r); err != nil {
		return fmt.Errorf("gpufaultsreceiver: %w", err)
	}
	kafkaHost := &kafkaclient.Host{}
	kafkaHost.Set(host)
	opts, err := kafkaclient.Options(ctx, r.cfg.ClientConfig, kafkaHost, r.logger)
	if err != nil {
		return fmt.Errorf("gpufaultsreceiver: %w", err)
	}
	reset := kgo.NewOffset().AtStart()
	if r.cfg.InitialOffset == configkafka.LatestOffset {
		reset = kgo.NewOffset().AtEnd()
	}
	opts = append(opts,
		kgo.ConsumerGroup(r.cfg.GroupID),
		kgo.ConsumeTopics(r.cfg.Topic),
		kgo.Balancers(r.balancer),
		kgo.SessionTimeout(r.cfg.SessionTimeout),
		kgo.HeartbeatInterval(r.cfg.HeartbeatInterval),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		// A rebalance waits until the batch in hand is delivered and
		// committed, so a partition never changes owner mid-record.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("gpufaultsreceiver: kafka client: %w", err)
	}
	r.client = cl
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go r.run(runCtx)
	return nil
}

// Shutdown stops delivering, then leaves the group so that a standby takes
// the partitions at once instead of after session_timeout. Each wait is
// bounded by shutdownWait: a record in flight is not committed either way
// (the next owner reads it again), and a group left late is left by the
// session timeout.
func (r *gpuFaultsReceiver) Shutdown(ctx context.Context) error {
	defer r.tb.Shutdown()
	if r.withdraw != nil {
		r.withdraw()
	}
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	wait := time.NewTimer(r.wait)
	defer wait.Stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-wait.C:
		// The next consumer ignores the cancelled context; closing the
		// client below ends the loop once it returns.
		r.logger.Warn("gpu_faults: the record in flight did not return; leaving it uncommitted",
			zap.Duration("waited", r.wait))
	}
	// Leaving waits for the poll in hand to allow the rebalance
	// (BlockRebalanceOnPoll): after the bound above, the record in flight
	// must not hold it (its commit fails on the closed client).
	r.client.AllowRebalance()
	leaveCtx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	err := r.client.LeaveGroupContext(leaveCtx)
	r.client.Close()
	if err != nil && !errors.Is(err, kgo.ErrClientClosed) {
		// Kafka unreachable: nothing to lose (offsets are committed per
		// record), a standby takes over after session_timeout instead of at
		// once. Not a failed shutdown.
		r.logger.Warn("gpu_faults: could not leave the consumer group; a standby takes over after session_timeout",
			zap.String("group", r.cfg.GroupID), zap.Duration("session_timeout", r.cfg.SessionTimeout), zap.Error(err))
	}
	return nil
}

func (r *gpuFaultsReceiver) run(ctx context.Context) {
	defer close(r.done)
	for ctx.Err() == nil {
		fetches := r.client.PollRecords(ctx, maxPollRecords)
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			r.logger.Warn("gpu_faults: fetch failed", zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err))
		})
		stop := false
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, rec := range p.Records {
				if stop || !r.handle(ctx, rec) {
					stop = true
					return
				}
			}
		})
		r.client.AllowRebalance()
	}
}

// handle delivers rec until the next consumer is done with it, then commits
// its offset synchronously. false: stop this batch (shutting down, or the
// partition is no longer ours); rec is not committed and will be read again.
func (r *gpuFaultsReceiver) handle(ctx context.Context, rec *kgo.Record) bool {
	backoff := r.cfg.RetryBackoff.InitialInterval
	for attempt := 1; ; attempt++ {
		err := r.router.route(ctx, rec)
		if err == nil {
			if attempt > 1 {
				r.logger.Info("gpu_faults: record accepted after retries",
					zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset), zap.Int("attempts", attempt))
			}
			break
		}
		if ctx.Err() != nil {
			return false
		}
		if attempt == 1 {
			r.logger.Warn("gpu_faults: next consumer failed; retrying the record",
				zap.String("topic", rec.Topic), zap.Int32("partition", rec.Partition),
				zap.Int64("offset", rec.Offset), zap.Error(err))
		}
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, r.cfg.RetryBackoff.MaxInterval)
	}
	backoff = r.cfg.RetryBackoff.InitialInterval
	for {
		// The record was decided: commit it even when the shutdown began
		// meanwhile (a commit cut short hands it to the next owner a second
		// time), within the bound Shutdown waits for the record in flight.
		commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.wait)
		err := r.client.CommitRecords(commitCtx, rec)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		r.logger.Warn("gpu_faults: commit failed",
			zap.String("topic", rec.Topic), zap.Int32("partition", rec.Partition),
			zap.Int64("offset", rec.Offset), zap.Error(err))
		if errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.UnknownMemberID) ||
			errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.FencedInstanceID) {
			return false // the group moved on: the new owner reads rec again
		}
		if !sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, r.cfg.RetryBackoff.MaxInterval)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// assigned runs once per group generation joined, with what it added.
func (r *gpuFaultsReceiver) assigned(ctx context.Context, cl *kgo.Client, added map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for topic, ps := range added {
		if r.owned[topic] == nil {
			r.owned[topic] = map[int32]struct{}{}
		}
		for _, p := range ps {
			r.owned[topic][p] = struct{}{}
		}
	}
	n := r.countOwned()
	_, generation := cl.GroupMetadata()
	r.joined, r.generation = true, generation
	if n > 0 {
		r.balancer.claim.Store(int64(generation) + 1)
	} else {
		r.balancer.claim.Store(0)
	}
	r.tb.GpuFaultsRebalances.Add(ctx, 1)
	r.tb.GpuFaultsPartitionsOwned.Record(ctx, int64(n))
	if n > 0 {
		r.logger.Info("gpu_faults: this member owns the partitions and acts on faults",
			zap.String("group", r.cfg.GroupID), zap.Int32("generation", generation), zap.Int("partitions", n))
	} else {
		owner := "unknown (a group leader of an earlier version)"
		if o := r.balancer.owner.Load(); o != nil {
			owner = o.String()
		}
		r.logger.Info("gpu_faults: standby member: another replica owns the partitions and acts", zap.String("group", r.cfg.GroupID),
			zap.Int32("generation", generation), zap.String("owner", owner))
	}
}

// revoked: an eager rebalance takes everything back before the next
// assignment; the claim stays, so the owner gets its partitions again.
func (r *gpuFaultsReceiver) revoked(ctx context.Context, _ *kgo.Client, gone map[string][]int32) {
	r.drop(ctx, gone)
}

// lost: the session ended (expired, fenced); another member may own the
// partitions now, so the claim goes too.
func (r *gpuFaultsReceiver) lost(ctx context.Context, _ *kgo.Client, gone map[string][]int32) {
	r.balancer.claim.Store(0)
	r.drop(ctx, gone)
	r.logger.Warn("gpu_faults: partitions lost (session ended)", zap.String("group", r.cfg.GroupID))
}

func (r *gpuFaultsReceiver) drop(ctx context.Context, gone map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.joined = false // electing until the next assignment
	for topic, ps := range gone {
		for _, p := range ps {
			delete(r.owned[topic], p)
		}
	}
	r.tb.GpuFaultsPartitionsOwned.Record(ctx, int64(r.countOwned()))
}

func (r *gpuFaultsReceiver) countOwned() int {
	n := 0
	for _, ps := range r.owned {
		n += len(ps)
	}
	return n
}
