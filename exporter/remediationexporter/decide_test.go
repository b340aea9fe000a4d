package remediationexporter

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/kafka/configkafka"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

const decisionsTopic = "gpu_fault_decisions"

// newDecisionCluster is an in-process Kafka with the decision topic.
func newDecisionCluster(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, decisionsTopic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// withDecisionLog makes the exporter a replica named replica of the
// decision log on cluster.
func withDecisionLog(t testing.TB, cluster *kfake.Cluster, replica string) harnessOpt {
	return func(c *Config, d *dependencies) {
		c.Decisions.Brokers = cluster.ListenAddrs()
		l, err := decisionlog.New(context.Background(), decisionlog.Options{
			Client: clientConfigOf(c), Topic: c.Decisions.Topic, Retention: c.Decisions.Retention,
			MaxKeys: c.Decisions.MaxKeys, Timeout: c.Decisions.Timeout, Logger: zap.NewNop(),
		})
		require.NoError(t, err)
		d.decisions, d.replica = l, replica
	}
}

// readDecisions reads the whole decision topic with a client of its own.
func readDecisions(t *testing.T, cluster *kfake.Cluster) []decisionlog.Decision {
	t.Helper()
	l, err := decisionlog.New(context.Background(), decisionlog.Options{
		Client: clientConfigOf(createDefaultConfig().(*Config), cluster.ListenAddrs()...), Topic: decisionsTopic,
		Retention: defaultDecisionsConfig().Retention, MaxKeys: 1000, Timeout: defaultDecisionsConfig().Timeout, Logger: zap.NewNop(),
	})
	require.NoError(t, err)
	defer l.Close()
	ds, err := l.CatchUp(context.Background(), newFakeClock().Now())
	require.NoError(t, err)
	return ds
}

func clientConfigOf(c *Config, brokers ...string) configkafka.ClientConfig {
	cc := configkafka.ClientConfig(c.Decisions.KafkaClientConfig)
	if len(brokers) > 0 {
		cc.Brokers = brokers
	}
	return cc
}

func decisionsOf(h *harness, step, decision string) []audit.Entry {
	var out []audit.Entry
	for _, e := range h.auditFor(step, decision) {
		if e.DecisionKey != "" {
			out = append(out, e)
		}
	}
	return out
}

// The same record delivered to two replicas one after the other (the
// gpu_faults owner killed after acting, the next owner getting the
// uncommitted record) is one decision: the second replica skips it.
func TestDecisionLogOneDecisionAcrossReplicas(t *testing.T) {
	cluster := newDecisionCluster(t)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)

	a := newHarness(t, withDecisionLog(t, cluster, "gateway-0"))
	b := newHarness(t, withDecisionLog(t, cluster, "gateway-1"))
	require.NoError(t, a.consume(dbe))
	require.NoError(t, b.consume(dbe), "the redelivery after a failover")

	qa, _ := a.platform.counts()
	qb, _ := b.platform.counts()
	assert.Equal(t, 1, qa)
	assert.Zero(t, qb, "the next owner does not act again")
	assert.Len(t, a.hook.got(), 1, "one webhook")

	ds := readDecisions(t, cluster)
	require.Len(t, ds, 1, "one decision in the log")
	assert.Equal(t, decisionKey(dbe), ds[0].Key)
	assert.Equal(t, "gateway-0", ds[0].Replica)
	assert.Equal(t, dbe.ID, ds[0].FaultID)
	require.NotEmpty(t, ds[0].Entries)
	assert.Equal(t, stepQuarantine, ds[0].Entries[0].Step)
	assert.Equal(t, audit.DecisionActed, ds[0].Entries[0].Decision)

	assert.Len(t, decisionsOf(a, stepQuarantine, audit.DecisionActed), 1, "the decision, audited by its replica")
	assert.Empty(t, decisionsOf(b, stepQuarantine, audit.DecisionActed))
	skips := b.auditFor(stepRecord, audit.DecisionSkipped)
	require.Len(t, skips, 1)
	assert.Equal(t, "decided by gateway-0", skips[0].Reason)
	assert.Equal(t, decisionKey(dbe), skips[0].DecisionKey)

	// Within one replica, a redelivery is skipped the same way.
	require.NoError(t, a.consume(dbe))
	qa, _ = a.platform.counts()
	assert.Equal(t, 1, qa)
	assert.Len(t, readDecisions(t, cluster), 1)

	require.NoError(t, b.consume(withState(dbe, fault.StateResolved)))
	assert.Len(t, readDecisions(t, cluster), 2, "the resolution is a decision of its own")
	// b learned from the log that xl003 was quarantined and the webhook
	// heard of the fault: it posts the resolution and weighs the release.
	rel := b.auditFor(stepRelease, audit.DecisionSkipped)
	require.Len(t, rel, 1)
	assert.Equal(t, "xl003", rel[0].Node)
	assert.Equal(t, []string{"cordon", "taint", "condition"}, rel[0].Actions)
	require.Len(t, b.hook.got(), 1)
	assert.Equal(t, "resolved", b.hook.got()[0].Decision.Outcome)
}

// An escalation (a higher severity) is a new decision, not a duplicate.
func TestDecisionLogEscalationIsNewDecision(t *testing.T) {
	cluster := newDecisionCluster(t)
	a := newHarness(t, withDecisionLog(t, cluster, "gateway-0"))
	p3 := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP3, "xl004", fault.StateOpen)
	p1 := p3
	p1.State, p1.Severity = fault.StateUpdate, fault.SeverityP1
	require.NoError(t, a.consume(p3))
	require.NoError(t, a.consume(p1))
	require.NoError(t, a.consume(p1))
	ds := readDecisions(t, cluster)
	require.Len(t, ds, 2)
	assert.NotEqual(t, ds[0].Key, ds[1].Key)
}

// A replica started later (a restart, a new pod) rebuilds the decided set
// from the log alone: its own audit file is empty.
func TestDecisionLogRestartRebuildsFromLog(t *testing.T) {
	cluster := newDecisionCluster(t)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl005", fault.StateOpen)
	first := newHarness(t, withDecisionLog(t, cluster, "gateway-0"))
	require.NoError(t, first.consume(dbe))
	require.NoError(t, first.exp.Shutdown(context.Background()))

	fresh := filepath.Join(t.TempDir(), "fresh.jsonl")
	second := newHarness(t, withDecisionLog(t, cluster, "gateway-0-restarted"), withAuditFile(fresh))
	require.NoError(t, second.consume(dbe))
	q, _ := second.platform.counts()
	assert.Zero(t, q)
	assert.Empty(t, second.hook.got())
	skips := entriesWith(t, fresh, stepRecord, audit.DecisionSkipped, "decided by gateway-0")
	require.Len(t, skips, 1)
	assert.Equal(t, 1, second.exp.decisions.Len())
}

// failProduce makes the broker refuse every produce until it is cleared.
func failProduce(cluster *kfake.Cluster) (stop func()) {
	var on atomic.Bool
	on.Store(true)
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !on.Load() {
			return nil, nil, false
		}
		cluster.KeepControl()
		preq := req.(*kmsg.ProduceRequest)
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return func() { on.Store(false) }
}

// A decision the log did not take is refused (retryable), not audited as
// a decision; the redelivery publishes the decision already made, without
// acting again.
func TestDecisionLogPublishFailureIsRetryable(t *testing.T) {
	cluster := newDecisionCluster(t)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl006", fault.StateOpen)
	a := newHarness(t, withDecisionLog(t, cluster, "gateway-0"))

	stop := failProduce(cluster)
	err := a.consume(dbe)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "the receiver redelivers")
	assert.Contains(t, err.Error(), "decision log")
	assert.Empty(t, a.auditFor(stepQuarantine, audit.DecisionActed), "no decision audited")
	assert.Empty(t, a.auditFor(stepWebhook, audit.DecisionActed))
	failed := a.auditFor(stepRecord, audit.DecisionFailed)
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Reason, "decision not published")
	q, _ := a.platform.counts()
	assert.Equal(t, 1, q, "the action ran (idempotent), before the publish")

	stop()
	require.NoError(t, a.consume(dbe), "the redelivery")
	q, _ = a.platform.counts()
	assert.Equal(t, 1, q, "not acted again")
	assert.Len(t, a.hook.got(), 1)
	acted := decisionsOf(a, stepQuarantine, audit.DecisionActed)
	require.Len(t, acted, 1, "the original decision, audited once published")
	ds := readDecisions(t, cluster)
	require.Len(t, ds, 1)
	raw, err := json.Marshal(ds[0].Entries)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"decision":"acted"`)
}

// The log unreachable: nothing is decided, the record is refused.
func TestDecisionLogUnavailableDecidesNothing(t *testing.T) {
	cluster := newDecisionCluster(t)
	a := newHarness(t, withDecisionLog(t, cluster, "gateway-0"))
	a.exp.mu.Lock()
	a.exp.cfg.Decisions.Timeout = time.Nanosecond // the broker is closed below: give up at once
	a.exp.mu.Unlock()
	cluster.Close()
	err := a.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl007", fault.StateOpen))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	q, _ := a.platform.counts()
	assert.Zero(t, q, "no action without knowing the log")
	failed := a.auditFor(stepRecord, audit.DecisionFailed)
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Reason, "decision log unavailable")
}
