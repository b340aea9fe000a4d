package gpufaultsreceiver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/consumer/consumererror"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

// produceEach writes n records to every partition, bodies "<tag>-p<p>-<i>".
func produceEach(t *testing.T, brokers []string, tag string, n int) []string {
	var all []string
	for p := range int32(testPartitions) {
		var bodies []string
		for i := range n {
			bodies = append(bodies, fmt.Sprintf("%s-p%d-%d", tag, p, i))
		}
		produce(t, brokers, p, bodies...)
		all = append(all, bodies...)
	}
	return all
}

func bodiesBy(ds []delivery) map[string][]string {
	out := map[string][]string{}
	for _, d := range ds {
		out[d.body] = append(out[d.body], d.member)
	}
	return out
}

// Three members, one owner: it alone receives every record of every
// partition; when it leaves, one other member takes all partitions and
// resumes after the committed offsets: nothing twice, nothing missed.
func TestSingleOwnerAndFailover(t *testing.T) {
	brokers := newCluster(t)
	rc := newRecorder()
	cfg := testConfig(brokers)
	members := []*member{
		startMember(t, "a", cfg, rc.member("a")),
		startMember(t, "b", cfg, rc.member("b")),
		startMember(t, "c", cfg, rc.member("c")),
	}
	first := produceEach(t, brokers, "first", 5)
	waitFor(t, "every record delivered", func() bool { return len(bodiesBy(rc.deliveries())) == len(first) })

	var owner *member
	for _, m := range members {
		switch m.owned() {
		case testPartitions:
			require.Nil(t, owner, "two members own every partition")
			owner = m
		case 0:
		default:
			t.Fatalf("member %s owns %d of %d partitions", m.name, m.owned(), testPartitions)
		}
	}
	require.NotNil(t, owner, "no member owns the partitions")
	for body, by := range bodiesBy(rc.deliveries()) {
		assert.Equal(t, []string{owner.name}, by, body)
	}
	assert.Equal(t, int64(len(first)), owner.counter("otelcol_gpu_faults_records_delivered", ""))

	owner.stop()
	second := produceEach(t, brokers, "second", 5)
	waitFor(t, "records after the failover delivered", func() bool {
		return len(bodiesBy(rc.deliveries())) == len(first)+len(second)
	})
	var next *member
	for _, m := range members {
		if m != owner && m.owned() == testPartitions {
			next = m
		}
	}
	require.NotNil(t, next, "no standby took every partition")
	got := bodiesBy(rc.deliveries())
	for _, b := range first {
		assert.Equal(t, []string{owner.name}, got[b], "%s: delivered again after the failover", b)
	}
	for _, b := range second {
		assert.Equal(t, []string{next.name}, got[b], b)
	}
	assert.Len(t, rc.deliveries(), len(first)+len(second), "a record was delivered twice")
}

// A retryable error retries the same record (never the next one first) and
// commits nothing: a member started after a shutdown mid-retry gets the
// record again.
func TestRetryableErrorRedelivers(t *testing.T) {
	brokers := newCluster(t)
	rc := newRecorder()
	rc.fail = func(d delivery, attempt int) error {
		if d.body == "bad" {
			return errors.New("platform unreachable")
		}
		return nil
	}
	cfg := testConfig(brokers)
	a := startMember(t, "a", cfg, rc.member("a"))
	produce(t, brokers, 0, "bad", "after")
	waitFor(t, "the failing record retried", func() bool { return len(rc.deliveries()) >= 3 })
	a.stop()
	for _, d := range rc.deliveries() {
		assert.Equal(t, "bad", d.body, "a later record was delivered before the failing one succeeded")
	}

	rc.mu.Lock()
	rc.fail = nil
	rc.mu.Unlock()
	startMember(t, "b", cfg, rc.member("b"))
	waitFor(t, "both records delivered by the new member", func() bool {
		return len(bodiesBy(rc.deliveries())["after"]) == 1
	})
	got := bodiesBy(rc.deliveries())
	assert.Contains(t, got["bad"], "b", "the failed record was committed: not redelivered")
	assert.Equal(t, []string{"b"}, got["after"])
}

// A permanent error and an undecodable record are counted, committed and
// passed; a member started afterwards does not see them again.
func TestPermanentErrorCommitsAndCounts(t *testing.T) {
	brokers := newCluster(t)
	rc := newRecorder()
	rc.fail = func(d delivery, _ int) error {
		if d.body == "refused" {
			return consumererror.NewPermanent(errors.New("not a fault record"))
		}
		return nil
	}
	cfg := testConfig(brokers)
	a := startMember(t, "a", cfg, rc.member("a"))
	produce(t, brokers, 1, "refused")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	produceRaw(t, cl, 1, []byte{0xff, 0xff, 0xff})
	cl.Close()
	produce(t, brokers, 1, "good")
	waitFor(t, "the good record delivered", func() bool { return len(bodiesBy(rc.deliveries())["good"]) == 1 })
	assert.Equal(t, int64(1), a.counter("otelcol_gpu_faults_records_refused", metadata.ReasonPermanent))
	assert.Equal(t, int64(1), a.counter("otelcol_gpu_faults_records_refused", metadata.ReasonUndecodable))
	assert.Equal(t, int64(1), a.counter("otelcol_gpu_faults_records_delivered", ""))
	a.stop()

	rc.mu.Lock()
	rc.fail = nil
	rc.mu.Unlock()
	startMember(t, "b", cfg, rc.member("b"))
	produce(t, brokers, 1, "marker")
	waitFor(t, "the marker delivered", func() bool { return len(bodiesBy(rc.deliveries())["marker"]) == 1 })
	for _, d := range rc.deliveries() {
		if d.member == "b" {
			assert.Equal(t, "marker", d.body, "b got a record a had committed")
		}
	}
	assert.Len(t, rc.deliveries(), 3, "refused, good, marker")
}
