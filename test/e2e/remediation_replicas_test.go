//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// replicaPartitions is the partition count of every topic here, so that
// each of the three replicas detects on one partition of each input topic.
const replicaPartitions = 3

// Three real gateway replicas share the input topics (detection split by
// partition) and the single-owner gpu_faults group (one remediates).
// Faults are produced on every partition of otlp_logs (XID 79) and
// otlp_metrics (a volatile DBE count growing 0 -> 3) as agents would, for
// distinct nodes. Every fault must be acted on (a dry-run quarantine)
// exactly once across the cluster: once in the decision log
// gpu_fault_decisions, once in the replicas' audit files. The owner is
// killed with SIGKILL while faults flow, then a follower: still exactly
// once, nothing missed.
func TestRemediationReplicasExactlyOnce(t *testing.T) {
	root := repoRoot(t)
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults,gpu_fault_decisions",
		"-partitions", strconv.Itoa(replicaPartitions))
	sink := newLogSink(t) // Loki and Prometheus: accept and drop

	type replica struct {
		name, audit, health, metrics string
		proc                         *process
	}
	replicas := make([]*replica, 3)
	for i := range replicas {
		r := &replica{name: fmt.Sprintf("gateway-%d", i), audit: filepath.Join(t.TempDir(), "audit.jsonl")}
		health, telemetry := freeAddr(t), freeAddr(t)
		r.health, r.metrics = "http://"+health+"/", "http://"+telemetry+"/metrics"
		r.proc = startProcess(t, r.name, []string{
			"KAFKA_BROKERS=" + brokerAddr,
			"KAFKA_GROUP_INSTANCE_ID=" + r.name,
			// The broker's smallest (group.min.session.timeout.ms): a
			// killed replica's partitions move after 6 s.
			"KAFKA_SESSION_TIMEOUT=6s",
			"REMEDIATION_SESSION_TIMEOUT=6s",
			"REMEDIATION_HEARTBEAT_INTERVAL=500ms",
			"REMEDIATION_DRY_RUN=true",
			"REMEDIATION_AUDIT_FILE=" + r.audit,
			"PROMETHEUS_REMOTE_WRITE_URL=" + sink + "/api/v1/write",
			"LOKI_OTLP_ENDPOINT=" + sink,
			"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
			"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
			"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
			"OTELCOL_GPU_TELEMETRY_HOST=" + host(telemetry),
			"OTELCOL_GPU_TELEMETRY_PORT=" + port(telemetry),
		}, gatewayBin, "--config", filepath.Join(root, "distributions", "gateway", "config.yaml"))
		replicas[i] = r
	}
	live := func() []*process {
		out := []*process{broker}
		for _, r := range replicas {
			if !r.proc.exited() {
				out = append(out, r.proc)
			}
		}
		return out
	}
	for _, r := range replicas {
		waitHTTP(t, r.health, r.proc)
	}

	// owner finds the one live replica whose gpu_faults receiver owns every
	// partition; the others must own none.
	owner := func() (*replica, error) {
		var found *replica
		for _, r := range replicas {
			if r.proc.exited() {
				continue
			}
			n, err := scrapeGauge(r.metrics, "otelcol_gpu_faults_partitions_owned")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
			switch {
			case n == replicaPartitions && found == nil:
				found = r
			case n == replicaPartitions:
				return nil, fmt.Errorf("%s and %s both own every partition", found.name, r.name)
			case n != 0:
				return nil, fmt.Errorf("%s owns %v of %d partitions", r.name, n, replicaPartitions)
			}
		}
		if found == nil {
			return nil, fmt.Errorf("no replica owns the gpu_faults partitions")
		}
		return found, nil
	}
	var first *replica
	eventually(t, 60*time.Second, "one replica owns every gpu_faults partition", func() (err error) {
		first, err = owner()
		return err
	}, live()...)
	t.Logf("%s owns gpu_faults", first.name)

	faults := consumeFaultIDs(t, brokerAddr)
	decisions := consumeDecisions(t, brokerAddr)
	prod := newAgentProducer(t, brokerAddr)

	// Every node must end with one fault of its kind on gpu_faults and one
	// dry-run quarantine for it.
	var mu sync.Mutex
	var nodes []injected
	inject := func(wave string, n int, pace time.Duration) {
		for i := range n {
			in := injected{host: fmt.Sprintf("%s-n%02d", wave, i), partition: int32(i % replicaPartitions)}
			if i%2 == 0 {
				in.typ = "gpu.fell_off_bus"
				prod.xid79(t, in)
			} else {
				in.typ = "gpu.memory.dbe"
				prod.dbeGrowth(t, in)
			}
			mu.Lock()
			nodes = append(nodes, in)
			mu.Unlock()
			time.Sleep(pace)
		}
	}
	settled := func(what string) {
		eventually(t, 90*time.Second, what, func() error {
			mu.Lock()
			want := append([]injected(nil), nodes...)
			mu.Unlock()
			return allDecided(want, faults, decisions)
		}, live()...)
	}

	// Wave a: every partition of both input topics, all replicas up.
	inject("a", 12, 0)
	settled("wave a: every fault decided")

	// Wave b: kill -9 the owner while faults flow.
	streaming := make(chan struct{})
	go func() { defer close(streaming); inject("b", 18, 150*time.Millisecond) }()
	eventually(t, 60*time.Second, "wave b reaches the owner", func() error {
		if n := len(decisions.quarantines()); n <= 12 {
			return fmt.Errorf("%d faults decided", n)
		}
		return nil
	}, live()...)
	if err := first.proc.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.proc.Done()
	killedOwner := time.Now()
	t.Logf("%s (the owner) killed with SIGKILL with %d faults decided", first.name, len(decisions.quarantines()))
	<-streaming
	var second *replica
	eventually(t, 60*time.Second, "a standby owns every gpu_faults partition", func() (err error) {
		second, err = owner()
		return err
	}, live()...)
	t.Logf("%s owns gpu_faults %s after the kill", second.name, time.Since(killedOwner).Round(100*time.Millisecond))
	settled("wave b: every fault decided after the owner's death")

	// Wave c: kill -9 the follower while faults flow.
	var follower *replica
	for _, r := range replicas {
		if r != first && r != second {
			follower = r
		}
	}
	streaming = make(chan struct{})
	go func() { defer close(streaming); inject("c", 18, 150*time.Millisecond) }()
	time.Sleep(time.Second)
	if err := follower.proc.Kill(); err != nil {
		t.Fatal(err)
	}
	<-follower.proc.Done()
	t.Logf("%s (a follower) killed with SIGKILL", follower.name)
	<-streaming
	settled("wave c: every fault decided after the follower's death")
	if o, err := owner(); err != nil || o != second {
		t.Errorf("after the follower's death the owner is %v (%v), want %s", o, err, second.name)
	}

	// Exactly once, in the decision log and in the audit files together.
	mu.Lock()
	defer mu.Unlock()
	ids := map[string]injected{}
	for _, in := range nodes {
		for _, id := range faults.ids(in.host, in.typ) {
			ids[id] = in
		}
	}
	inLog := decisions.quarantines()
	inAudit := map[string][]string{}
	for _, r := range replicas {
		for _, e := range quarantines(t, r.audit) {
			inAudit[e.FaultID] = append(inAudit[e.FaultID], r.name)
		}
	}
	for id, in := range ids {
		if n := len(inLog[id]); n != 1 {
			t.Errorf("fault %s (%s on %s, partition %d): %d dry-run quarantine decisions in gpu_fault_decisions, by %v",
				id, in.typ, in.host, in.partition, n, inLog[id])
		}
		if n := len(inAudit[id]); n != 1 {
			t.Errorf("fault %s (%s on %s): %d dry-run quarantines in the audit files, by %v", id, in.typ, in.host, n, inAudit[id])
		}
	}
	for id := range inAudit {
		if _, ok := ids[id]; !ok {
			t.Errorf("a quarantine for fault %s, which no injected node opened", id)
		}
	}
	// Only the owner of the moment decides: wave a's faults all by the
	// first owner, wave c's all by the second (the decision log names the
	// replica as host-pid-component).
	byPid := func(r *replica) string { return "-" + strconv.Itoa(r.proc.Pid()) + "-" }
	for id, in := range ids {
		var want *replica
		switch {
		case strings.HasPrefix(in.host, "a-"):
			want = first
		case strings.HasPrefix(in.host, "c-"):
			want = second
		default:
			continue
		}
		for _, by := range inLog[id] {
			if !strings.Contains(by, byPid(want)) {
				t.Errorf("fault %s on %s decided by %s, not by the owner %s (pid %d)", id, in.host, by, want.name, want.proc.Pid())
			}
		}
	}
	byReplica := map[string]int{}
	for _, by := range inLog {
		for _, r := range by {
			byReplica[r]++
		}
	}
	redelivered := 0
	for _, r := range replicas {
		for _, e := range auditEntries(t, r.audit) {
			if e.Decision == "skipped" && strings.HasPrefix(e.Reason, "decided by ") {
				redelivered++
			}
		}
	}
	t.Logf("%d nodes, %d faults, each decided once; decisions by replica %v; %d redelivered records found decided in the log",
		len(nodes), len(ids), byReplica, redelivered)
	if t.Failed() {
		for _, r := range replicas {
			r.proc.dumpLog(t, 40)
		}
	}
}

// host returns the host part of addr.
func host(addr string) string {
	h, _, _ := netSplit(addr)
	return h
}

// scrapeGauge reads one unlabelled-or-labelled sample of name from a
// Prometheus text page (the sum of its series).
func scrapeGauge(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found, sum := false, 0.0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		found, sum = true, sum+v
	}
	if !found {
		return 0, fmt.Errorf("%s not on %s yet", name, url)
	}
	return sum, sc.Err()
}

// injected is one node's fault as the test produced it.
type injected struct {
	host      string
	typ       fault.Type
	partition int32
}

// allDecided: every injected node has its fault on gpu_faults and a
// dry-run quarantine for it in the decision log.
func allDecided(want []injected, faults *faultIDs, decisions *decisionLog) error {
	q := decisions.quarantines()
	var opened, decided int
	var missing []string
	for _, in := range want {
		ids := faults.ids(in.host, in.typ)
		if len(ids) == 0 {
			missing = append(missing, in.host+" (no fault)")
			continue
		}
		opened++
		undecided := 0
		for _, id := range ids {
			if len(q[id]) == 0 {
				undecided++
			}
		}
		if undecided > 0 {
			missing = append(missing, in.host+" (not decided)")
			continue
		}
		decided++
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%d of %d nodes opened, %d decided; e.g. %v", opened, len(want), decided, missing[:min(len(missing), 5)])
	}
	return nil
}

// agentProducer writes what agents write: OTLP protobuf with the node's
// resource attributes, to a chosen partition.
type agentProducer struct {
	cl *kgo.Client
}

func newAgentProducer(t *testing.T, broker string) *agentProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &agentProducer{cl: cl}
}

func (p *agentProducer) send(t *testing.T, topic string, partition int32, key string, value []byte) {
	t.Helper()
	rec := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Value: value}
	if err := p.cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatalf("producing to %s/%d: %v", topic, partition, err)
	}
}

func gpuUUID(host string) string { return "GPU-" + host + "-0" }

// xid79 is the dcgm receiver's record of an XID 79 on GPU 0 of the node.
func (p *agentProducer) xid79(t *testing.T, in injected) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(semconv.AttrHostName, in.host)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(semconv.ScopeDCGMReceiver)
	lr := sl.LogRecords().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	lr.SetTimestamp(now)
	lr.SetObservedTimestamp(now)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Body().SetStr("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
	lr.Attributes().PutInt(semconv.AttrGPUXID, 79)
	lr.Attributes().PutStr(semconv.AttrGPUUUID, gpuUUID(in.host))
	lr.Attributes().PutStr(semconv.AttrGPUIndex, "0")
	b, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	p.send(t, "otlp_logs", in.partition, in.host, b)
}

// dbeGrowth is two scrapes of the node's volatile DBE counter: 0, then 3.
func (p *agentProducer) dbeGrowth(t *testing.T, in injected) {
	start := time.Now().Add(-time.Hour) // the agent started long ago: 0 is a baseline
	for i, v := range []int64{0, 3} {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr(semconv.AttrHostName, in.host)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(semconv.ScopeDCGMReceiver)
		m := sm.Metrics().AppendEmpty()
		m.SetName(semconv.MetricGPUECCErrors)
		m.SetUnit("{error}")
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now().Add(time.Duration(i-1) * time.Second)))
		dp.SetIntValue(v)
		dp.Attributes().PutStr(semconv.AttrGPUUUID, gpuUUID(in.host))
		dp.Attributes().PutStr(semconv.AttrGPUIndex, "0")
		dp.Attributes().PutStr(semconv.AttrGPUECCType, semconv.ECCTypeDBEVolatile)
		b, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		if err != nil {
			t.Fatal(err)
		}
		p.send(t, "otlp_metrics", in.partition, in.host, b)
	}
}

// faultIDs reads gpu_faults from the start: the ids of the open records by
// node and type.
type faultIDs struct {
	mu    sync.Mutex
	byKey map[string]map[string]bool // host/type -> fault ids
}

func consumeFaultIDs(t *testing.T, broker string) *faultIDs {
	f := &faultIDs{byKey: map[string]map[string]bool{}}
	consumeFaultRecords(t, broker, func(_ *kgo.Record, records []fault.Record, _ time.Time) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range records {
			if r.State != fault.StateOpen {
				continue
			}
			k := r.HostName + "/" + string(r.Type)
			if f.byKey[k] == nil {
				f.byKey[k] = map[string]bool{}
			}
			f.byKey[k][r.ID] = true
		}
	})
	return f
}

func (f *faultIDs) ids(host string, typ fault.Type) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.byKey[host+"/"+string(typ)] {
		out = append(out, id)
	}
	return out
}

// decisionLog reads gpu_fault_decisions (exporter/remediationexporter's
// decision log: one JSON decision per record) from the start.
type decisionLog struct {
	mu      sync.Mutex
	byFault map[string][]string // fault id -> replicas with a dry-run quarantine
}

// decision is the part of a decision-log record the test reads.
type decision struct {
	FaultID string       `json:"fault.id"`
	Replica string       `json:"replica"`
	Entries []auditEntry `json:"entries"`
}

func consumeDecisions(t *testing.T, broker string) *decisionLog {
	d := &decisionLog{byFault: map[string][]string{}}
	consumeTopic(t, broker, "gpu_fault_decisions", func(rec *kgo.Record) {
		var dec decision
		if err := json.Unmarshal(rec.Value, &dec); err != nil {
			t.Errorf("gpu_fault_decisions: offset %d/%d: %v", rec.Partition, rec.Offset, err)
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, e := range dec.Entries {
			if e.Step == "quarantine" && e.Decision == "dry_run" {
				d.byFault[dec.FaultID] = append(d.byFault[dec.FaultID], dec.Replica)
			}
		}
	})
	return d
}

func (d *decisionLog) quarantines() map[string][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]string, len(d.byFault))
	for k, v := range d.byFault {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// consumeTopic reads topic from the start in the background until the test
// ends.
func consumeTopic(t *testing.T, broker, topic string, fn func(*kgo.Record)) {
	client, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			client.PollFetches(ctx).EachRecord(fn)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		client.Close()
	})
}
