//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/loadtest"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// Failure tests: the real binaries on one simulated 8-GPU node whose job
// gets a compute straggler at step 12 (a fault only the gateway can find:
// the straggler processor runs there), while a gateway dies or a backend
// goes away.

const metricsGroup = "otelcol-gpu-gateway-metrics"

// failureRig is a broker, one simulated node with its agent, and the
// gpu_faults reader; the test starts the gateways.
type failureRig struct {
	root    string
	cluster *testbed.Cluster
	node    testbed.NodeInputs
	broker  string
	// control is the broker's control endpoint (test/kfakebroker): topics
	// made unwritable.
	control string
	faults  *faultConsumer
	procs   []*process
	lag     *loadtest.Broker
	agent   *process
	otlpURL string
	// gatewayStorage is the gateways' OTELCOL_GPU_STORAGE_DIR.
	gatewayStorage string
}

func newFailureRig(t *testing.T) *failureRig {
	r := &failureRig{root: repoRoot(t), gatewayStorage: t.TempDir()}
	agentBin := binary(t, "otelcol-gpu-agent")
	brokerBin := buildBroker(t)

	opts := testbed.DefaultOptions()
	opts.Ranks = 8
	opts.Scenarios = []string{"compute_straggler"}
	opts.Logger = zaptest.NewLogger(t)
	cluster, err := testbed.NewCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	r.cluster = cluster
	r.node = cluster.Nodes()[0]

	r.broker, r.control = freeAddr(t), freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", r.broker, "-advertise", r.broker, "-control-listen", r.control,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	r.procs = append(r.procs, broker)
	lag, err := loadtest.ConnectBroker(r.broker, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lag.Close)
	r.lag = lag

	addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
	env, err := r.node.AgentEnv(r.broker, t.TempDir(), addrs, true)
	if err != nil {
		t.Fatal(err)
	}
	r.agent = startProcess(t, "agent", env, agentBin, "--config", filepath.Join(r.root, "distributions", "agent", "config.yaml"))
	health, httpAddr := addrs.Health, addrs.OTLPHTTP
	r.procs = append(r.procs, r.agent)
	waitHTTP(t, "http://"+health+"/", r.agent)
	r.otlpURL = "http://" + httpAddr + "/v1/traces"
	r.faults = consumeFaults(t, r.broker)
	return r
}

// startGateway runs a gateway on the rig's broker; env adds to the
// backends' endpoints. Every gateway of the rig uses the same storage
// directory (Tempo's queue), as a restarted pod keeps its volume.
func (r *failureRig) startGateway(t *testing.T, name string, env ...string) *process {
	health := freeAddr(t)
	gw := startProcess(t, name, append([]string{
		"KAFKA_BROKERS=" + r.broker,
		"OTELCOL_GPU_STORAGE_DIR=" + r.gatewayStorage,
		"STRAGGLER_DECISION_WAIT=1500ms",
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
	}, env...), binary(t, "otelcol-gpu-gateway"), "--config", filepath.Join(r.root, "distributions", "gateway", "config.yaml"))
	waitHTTP(t, "http://"+health+"/", gw)
	return gw
}

// drive runs the job's 36 steps (1 s each) in the background; wait
// returns Drive's error.
func (r *failureRig) drive(t *testing.T) (wait func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.cluster.Drive(ctx, func(string) string { return r.otlpURL }) }()
	var once sync.Once
	var err error
	wait = func() error {
		once.Do(func() { err = <-done })
		return err
	}
	t.Cleanup(func() {
		cancel()
		_ = wait()
	})
	return wait
}

func (r *failureRig) metricsLag(t *testing.T) int64 {
	return r.lagOf(t, metricsGroup, "otlp_metrics")
}

// lagOf is how many messages of topic the group has not committed yet.
func (r *failureRig) lagOf(t *testing.T, group, topic string) int64 {
	lags, err := r.lag.Lag(context.Background(), []loadtest.GroupTopic{{Group: group, Topic: topic}})
	if err != nil {
		t.Fatal(err)
	}
	return loadtest.TotalLag(lags)
}

// stragglerFaults are the straggler.compute records read from gpu_faults
// with their arrival times.
func (r *failureRig) stragglerFaults() ([]fault.Record, []time.Time) {
	records, arrivals := r.faults.snapshot()
	var rs []fault.Record
	var ts []time.Time
	for i, rec := range records {
		if rec.Type == fault.Type("straggler.compute") {
			rs, ts = append(rs, rec), append(ts, arrivals[i])
		}
	}
	return rs, ts
}

// A gateway killed with SIGKILL while a remote-write batch is in flight,
// replaced by a new one in the same consumer group (same static member id):
// every data point the agent put into Kafka reaches the backend at least
// once, since nothing is committed before the backend answered. Remediation
// runs in dry run with an audit file shared by both lives: the second life
// rebuilds its idempotency state from it and acts on no fault again.
func TestGatewayKilledMidBatch(t *testing.T) {
	r := newFailureRig(t)
	host := r.node.Host

	// The backend records the samples of the node's InfiniBand transmit
	// counter by timestamp.
	var mu sync.Mutex
	seen := map[int64]int{}
	sinks, err := loadtest.StartSinksWith(loadtest.SinkOptions{
		OnSeries: func(series []loadtest.Series) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range series {
				if isXmitSeries(s.Labels, host) {
					for _, ts := range s.Timestamps {
						seen[ts]++
					}
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sinks.Close()

	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	env := []string{
		"PROMETHEUS_REMOTE_WRITE_URL=" + sinks.PromURL,
		"LOKI_OTLP_ENDPOINT=" + sinks.LokiURL,
		"TEMPO_OTLP_ENDPOINT=" + sinks.TempoAddr,
		"REMEDIATION_AUDIT_FILE=" + audit,
		// Static membership: the new gateway takes the dead one's
		// partitions at once instead of after the session timeout.
		"KAFKA_GROUP_INSTANCE_ID=gateway-0",
	}
	first := r.startGateway(t, "gateway-1", env...)
	all := append(r.procs, first)
	driven := r.drive(t)

	// Kill once the first life has acted on the straggler (dry run), at a
	// moment a remote-write batch is in flight.
	eventually(t, 90*time.Second, "the first gateway audits a straggler quarantine", func() error {
		if n := len(quarantines(t, audit)); n == 0 {
			return fmt.Errorf("no dry-run quarantine in %s yet", audit)
		}
		return nil
	}, all...)
	release := sinks.HoldRemoteWrite()
	defer release()
	held := sinks.RemoteWriteHeld.Load()
	eventually(t, 10*time.Second, "a remote-write batch in flight", func() error {
		if sinks.RemoteWriteHeld.Load() == held {
			return fmt.Errorf("none in flight")
		}
		return nil
	}, all...)
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	killedAt := time.Now()
	release()
	t.Logf("gateway-1 killed at %s with a remote-write batch unanswered, lag %d messages", killedAt.Format(time.TimeOnly), r.metricsLag(t))

	second := r.startGateway(t, "gateway-2", env...)
	if err := driven(); err != nil {
		t.Fatal(err)
	}
	// Stop the agent so that Kafka holds everything it will ever produce,
	// then let the second life consume it.
	r.agent.stop(t)
	eventually(t, 90*time.Second, "the second gateway consumes otlp_metrics to the end", func() error {
		if lag := r.metricsLag(t); lag > 0 {
			return fmt.Errorf("lag %d", lag)
		}
		return nil
	}, second)

	// Every point of the series in Kafka arrived at least once.
	produced := xmitPointsInKafka(t, r.broker, host)
	if len(produced) < 20 {
		t.Fatalf("only %d points of the transmit counter in Kafka", len(produced))
	}
	mu.Lock()
	var missing []int64
	duplicates := 0
	for _, ts := range produced {
		switch n := seen[ts]; {
		case n == 0:
			missing = append(missing, ts)
		case n > 1:
			duplicates++
		}
	}
	mu.Unlock()
	if len(missing) > 0 {
		t.Errorf("%d of %d points never reached the backend, e.g. %v", len(missing), len(produced), time.UnixMilli(missing[0]))
	}
	t.Logf("%d points of %s's transmit counter in Kafka, all at the backend; %d delivered more than once (redelivered after the kill)", len(produced), host, duplicates)

	// Remediation: at most one dry-run quarantine per fault id across both
	// lives. The second life rebuilds its idempotency state from the audit
	// file, so a fault the first life acted on and the second reads again
	// from Kafka is skipped as a duplicate.
	byLife := [2]map[string]int{{}, {}}
	for _, q := range quarantines(t, audit) {
		byLife[lifeOf(q, killedAt)][q.FaultID]++
	}
	for id, n := range byLife[0] {
		if n+byLife[1][id] > 1 {
			t.Errorf("fault %s's quarantine audited %d times in life 1 and %d in life 2, want once across both lives", id, n, byLife[1][id])
		}
	}
	for id, n := range byLife[1] {
		if n > 1 {
			t.Errorf("life 2 audited fault %s's quarantine %d times, want once", id, n)
		}
	}
	skipped := 0
	for _, e := range auditEntries(t, audit) {
		if e.Step == "quarantine" && e.Reason == "duplicate: fault already acted on" && lifeOf(e, killedAt) == 1 && byLife[0][e.FaultID] > 0 {
			skipped++
		}
	}
	t.Logf("dry-run quarantines: life 1 %v, life 2 %v; life 2 skipped %d record(s) of life 1's faults as duplicates", byLife[0], byLife[1], skipped)
	if len(byLife[0]) == 0 {
		t.Error("the first life audited no quarantine")
	}
}

// lifeOf is 0 for an audit entry of the gateway killed at killedAt, 1 for
// one of its successor.
func lifeOf(e auditEntry, killedAt time.Time) int {
	if e.Time.After(killedAt) {
		return 1
	}
	return 0
}

// Prometheus stopped for 30 s while data flows: the metrics pipeline holds
// its Kafka message (no queue, no batch), so the lag grows in Kafka and not
// in the gateway's memory; the outage's samples arrive after it; fault
// detection, in its own consumer groups, goes on meanwhile.
func TestPrometheusOutage(t *testing.T) {
	const outage = 30 * time.Second
	prom := startPrometheus(t)
	r := newFailureRig(t)
	host := r.node.Host
	sinks, err := loadtest.StartSinks() // Loki and Tempo stand-ins
	if err != nil {
		t.Fatal(err)
	}
	defer sinks.Close()
	gw := r.startGateway(t, "gateway",
		"PROMETHEUS_REMOTE_WRITE_URL="+prom.writeURL(),
		"LOKI_OTLP_ENDPOINT="+sinks.LokiURL,
		"TEMPO_OTLP_ENDPOINT="+sinks.TempoAddr)
	all := append(r.procs, gw, prom.proc)
	series := fmt.Sprintf(`hw_network_io_bytes_total{host_name=%q,ib_device="mlx5_0",network_io_direction="transmit"}`, host)
	eventually(t, 60*time.Second, "fresh samples before the outage", func() error {
		return freshSeriesSample(prom, series, time.Now().Add(-5*time.Second))
	}, all...)

	before, err := loadtest.MemoryOf(gw.Pid())
	if err != nil {
		t.Fatal(err)
	}
	lagBefore := r.metricsLag(t)
	// The bound: the metrics pipeline holds one message; what else the
	// gateway may buffer is its kafka receivers' fetches, at most
	// max_fetch_size (50 MiB) each time. Anything beyond that plus slack
	// would be the outage piling up in memory.
	bound := before.RSS + 50<<20 + 16<<20

	driven := r.drive(t)
	args := prom.proc.Args()
	prom.proc.stop(t)
	cutAt := time.Now()
	var maxLag int64
	var maxRSS int64
	for time.Since(cutAt) < outage {
		if lag := r.metricsLag(t); lag > maxLag {
			maxLag = lag
		}
		m, err := loadtest.MemoryOf(gw.Pid())
		if err != nil {
			t.Fatalf("the gateway: %v", err)
		}
		maxRSS = max(maxRSS, m.RSS)
		time.Sleep(500 * time.Millisecond)
	}
	restarted := startProcess(t, "prometheus-restarted", nil, args[0], args[1:]...)
	prom = &prometheus{addr: prom.addr, proc: restarted}
	all = append(r.procs, gw, restarted)
	waitHTTP(t, "http://"+prom.addr+"/-/ready", restarted)
	restoredAt := time.Now()
	t.Logf("Prometheus down %s..%s: lag %d -> max %d messages, gateway RSS %.0f MiB -> max %.0f MiB (bound %.0f MiB)",
		cutAt.Format(time.TimeOnly), restoredAt.Format(time.TimeOnly), lagBefore, maxLag,
		float64(before.RSS)/(1<<20), float64(maxRSS)/(1<<20), float64(bound)/(1<<20))

	if maxLag < lagBefore+10 {
		t.Errorf("consumer lag grew from %d to only %d messages over %s: the outage did not back up in Kafka", lagBefore, maxLag, outage)
	}
	if maxRSS > bound {
		t.Errorf("gateway RSS reached %d MiB during the outage, bound %d MiB", maxRSS>>20, bound>>20)
	}

	// Detection went on: the straggler's record reached gpu_faults while
	// Prometheus was away.
	recs, arrivals := r.stragglerFaults()
	during := 0
	for i := range recs {
		if arrivals[i].After(cutAt) && arrivals[i].Before(restoredAt) {
			during++
		}
	}
	if during == 0 {
		t.Errorf("no straggler.compute record on gpu_faults during the outage (%d in all, arrivals %v)", len(recs), arrivals)
	}

	// The outage's samples arrive, with no gap.
	eventually(t, 2*time.Minute, "samples after the outage", func() error {
		return freshSeriesSample(prom, series, restoredAt.Add(2*time.Second))
	}, all...)
	if err := driven(); err != nil {
		t.Fatal(err)
	}
	to := restoredAt.Add(2 * time.Second)
	lookback := to.Sub(cutAt) + 10*time.Second
	res, err := prom.query(fmt.Sprintf("%s[%ds]", series, int(math.Ceil(lookback.Seconds()))), to)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Values) == 0 {
		t.Fatalf("%d series across the outage, want 1 with samples", len(res))
	}
	samples := res[0].Values
	first, last := sampleTime(samples[0]), sampleTime(samples[len(samples)-1])
	if !first.Before(cutAt) || !last.After(restoredAt) {
		t.Fatalf("samples span %s..%s, want them to cover the outage %s..%s", first, last, cutAt, restoredAt)
	}
	var maxGap time.Duration
	for i := 1; i < len(samples); i++ {
		maxGap = max(maxGap, sampleTime(samples[i]).Sub(sampleTime(samples[i-1])))
	}
	if maxGap >= 2*time.Second {
		t.Errorf("largest gap between samples is %s: samples of the outage were lost", maxGap)
	}
	t.Logf("%d samples %s..%s across the outage, largest gap %s; %d straggler records during it", len(samples),
		first.Format(time.TimeOnly), last.Format(time.TimeOnly), maxGap, during)
}

// isXmitSeries selects the node's mlx5_0 transmit-bytes series.
func isXmitSeries(labels map[string]string, host string) bool {
	return strings.HasPrefix(labels["__name__"], "hw_network_io") && labels["host_name"] == host &&
		labels["ib_device"] == "mlx5_0" && labels["network_io_direction"] == "transmit"
}

// xmitPointsInKafka reads otlp_metrics from the start and returns the
// timestamps (Unix ms) of the node's mlx5_0 transmit-bytes points: what the
// agent produced.
func xmitPointsInKafka(t *testing.T, broker, host string) []int64 {
	client, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("otlp_metrics"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var un pmetric.ProtoUnmarshaler
	seen := map[int64]bool{}
	var out []int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		if fetches.NumRecords() == 0 {
			return out // caught up: nothing for 3 s
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			md, err := un.UnmarshalMetrics(rec.Value)
			if err != nil {
				t.Errorf("otlp_metrics: %v", err)
				return
			}
			for i := 0; i < md.ResourceMetrics().Len(); i++ {
				rm := md.ResourceMetrics().At(i)
				h, _ := rm.Resource().Attributes().Get("host.name")
				dev, _ := rm.Resource().Attributes().Get("ib.device")
				if h.Str() != host || dev.Str() != "mlx5_0" {
					continue
				}
				for j := 0; j < rm.ScopeMetrics().Len(); j++ {
					ms := rm.ScopeMetrics().At(j).Metrics()
					for k := 0; k < ms.Len(); k++ {
						m := ms.At(k)
						if m.Name() != "hw.network.io" || m.Type() != pmetric.MetricTypeSum {
							continue
						}
						dps := m.Sum().DataPoints()
						for d := 0; d < dps.Len(); d++ {
							dir, _ := dps.At(d).Attributes().Get("network.io.direction")
							ts := dps.At(d).Timestamp().AsTime().UnixMilli()
							if dir.Str() == "transmit" && !seen[ts] {
								seen[ts] = true
								out = append(out, ts)
							}
						}
					}
				}
			}
		})
	}
}

// auditEntry is the part of a remediation audit line the test reads.
type auditEntry struct {
	Time     time.Time `json:"time"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	Step     string    `json:"step"`
	FaultID  string    `json:"fault.id"`
	Severity string    `json:"fault.severity"`
	Node     string    `json:"node"`
	Rule     string    `json:"rule"`
	Actions  []string  `json:"actions"`
}

// quarantines are the audit file's dry-run quarantine entries.
func quarantines(t *testing.T, path string) []auditEntry {
	var out []auditEntry
	for _, e := range auditEntries(t, path) {
		if e.Decision == "dry_run" && e.Step == "quarantine" {
			out = append(out, e)
		}
	}
	return out
}

// auditEntries are the audit file's entries; a missing file has none.
func auditEntries(t *testing.T, path string) []auditEntry {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written when the gateway was killed
		}
		out = append(out, e)
	}
	return out
}

// freshSeriesSample checks that the series has a sample newer than since.
func freshSeriesSample(prom *prometheus, series string, since time.Time) error {
	res, err := prom.query("timestamp("+series+")", time.Time{})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("%s: %d series, want 1", series, len(res))
	}
	ts, err := sampleValue(res[0].Values[0])
	if err != nil {
		return err
	}
	if last := time.UnixMilli(int64(ts * 1000)); last.Before(since) {
		return fmt.Errorf("newest sample at %s, want after %s", last.Format(time.TimeOnly), since.Format(time.TimeOnly))
	}
	return nil
}

// Tempo unreachable while a straggler develops, then the gateway killed
// before Tempo is back. The traces pipeline, which the correlator shares,
// does not wait for Tempo: its sending queue is on disk, so the fault is
// published during the outage and the spans are committed in Kafka. The
// sampled traces in that queue survive the kill: the next gateway (same
// storage directory, as a StatefulSet pod keeps its volume) sends them to
// Tempo without reading anything from Kafka again.
func TestTempoOutage(t *testing.T) {
	r := newFailureRig(t)
	sinks, err := loadtest.StartSinks() // Prometheus and Loki stand-ins
	if err != nil {
		t.Fatal(err)
	}
	defer sinks.Close()
	tempoAddr := freeAddr(t) // nothing listens there until the end
	telemetry := freeAddr(t)
	env := []string{
		"PROMETHEUS_REMOTE_WRITE_URL=" + sinks.PromURL,
		"LOKI_OTLP_ENDPOINT=" + sinks.LokiURL,
		"TEMPO_OTLP_ENDPOINT=" + tempoAddr,
	}
	// The later OTELCOL_GPU_TELEMETRY_PORT wins over startGateway's.
	first := r.startGateway(t, "gateway-1", append(env, "OTELCOL_GPU_TELEMETRY_PORT="+port(telemetry))...)
	all := append(r.procs, first)
	start := time.Now()
	driven := r.drive(t)

	eventually(t, 90*time.Second, "a straggler fault published while Tempo is down", func() error {
		if rs, _ := r.stragglerFaults(); len(rs) == 0 {
			return errors.New("no straggler.compute record on gpu_faults yet")
		}
		return nil
	}, all...)
	_, arrivals := r.stragglerFaults()
	t.Logf("straggler.compute published %s after the job started, Tempo down all along", arrivals[0].Sub(start).Round(100*time.Millisecond))
	if err := driven(); err != nil {
		t.Fatal(err)
	}
	// Everything the agent will ever send is in Kafka; the gateway commits
	// it all although Tempo never answered.
	r.agent.stop(t)
	eventually(t, 60*time.Second, "otlp_spans committed to the end", func() error {
		if lag := r.lagOf(t, "otelcol-gpu-gateway-traces", "otlp_spans"); lag > 0 {
			return fmt.Errorf("lag %d", lag)
		}
		return nil
	}, first)
	// Tail sampling decides each trace decision_wait (5 s) after its first
	// span: wait until the queue stops growing.
	queueURL := "http://" + telemetry + "/metrics"
	queueSize := func() float64 {
		return telemetrySum(t, queueURL, "otelcol_exporter_queue_size", `exporter="otlp_grpc/tempo"`)
	}
	var queued float64
	lastChange := time.Now()
	eventually(t, 60*time.Second, "Tempo's queue settles with the sampled traces", func() error {
		if q := queueSize(); q != queued {
			queued, lastChange = q, time.Now()
		}
		switch {
		case queued == 0:
			return errors.New("nothing queued for Tempo")
		case time.Since(lastChange) < 8*time.Second:
			return fmt.Errorf("%.0f spans queued, still changing", queued)
		}
		return nil
	}, first)

	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	tempo := startTraceSinkAt(t, tempoAddr)
	second := r.startGateway(t, "gateway-2", env...)
	eventually(t, 60*time.Second, "the queued spans reach Tempo from the next gateway", func() error {
		// At least the queue: requests the first life was retrying when
		// it died were in flight, not in the count, and are sent too.
		if got := tempo.total(); float64(got) < queued {
			return fmt.Errorf("%d of %.0f queued spans at Tempo", got, queued)
		}
		return nil
	}, second)
	verdicts := tempo.withSpan("train.step.verdict")
	if len(verdicts) == 0 {
		t.Error("no straggler verdict span among the queued traces: the evidence the fault cites is lost")
	}
	if lag := r.lagOf(t, "otelcol-gpu-gateway-traces", "otlp_spans"); lag != 0 {
		t.Errorf("otlp_spans lag %d after the restart, want 0", lag)
	}
	t.Logf("%.0f spans queued on disk at the kill; %d reached Tempo from the next gateway, %d traces with straggler verdicts", queued, tempo.total(), len(verdicts))
}
