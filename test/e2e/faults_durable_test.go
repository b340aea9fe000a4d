//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/loadtest"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// faultsOutage is how long gpu_faults stays unwritable; CI runs 60 s.
var faultsOutage = flag.Duration("faults-outage", 60*time.Second, "how long TestFaultsDurableAcrossGatewayKill keeps gpu_faults unwritable")

// gatewayConfigEnv names another gateway config for
// TestFaultsDurableAcrossGatewayKill (BENCHMARKS.md: the latency before the
// disk queue); unset, the shipped distributions/gateway/config.yaml.
const gatewayConfigEnv = "E2E_GATEWAY_CONFIG"

// latencySamples is how many faults measure the latency before the outage.
const latencySamples = 5

// gpu_faults unwritable (the broker refuses its produce requests with a
// retriable error) for faultsOutage while faults open on a node, through
// the real agent's GPU receiver (a dcgm-exporter page), and the gateway
// killed with SIGKILL and restarted during the outage: every fault that
// opened reaches gpu_faults once the topic is writable again, keyed so that
// one fault's records share a partition, and reaches remediation (its
// dry-run audit). Before the outage it measures how long a fault takes from
// the page to gpu_faults (BENCHMARKS.md).
func TestFaultsDurableAcrossGatewayKill(t *testing.T) {
	outage := *faultsOutage
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)
	gatewayConfig := filepath.Join(root, "distributions", "gateway", "config.yaml")
	if c := os.Getenv(gatewayConfigEnv); c != "" {
		gatewayConfig = c
	}

	brokerAddr, control := freeAddr(t), freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr, "-control-listen", control,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults,gpu_fault_decisions", "-partitions", "3")
	all := []*process{broker}
	lag, err := loadtest.ConnectBroker(brokerAddr, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lag.Close)
	eventually(t, 30*time.Second, "the broker's control endpoint", func() error {
		_, err := topicControl(control, http.MethodGet, "gpu_faults")
		return err
	}, broker)

	const host = "durable-n0"
	page := newGPUPage(host, latencySamples+4)
	pageAddr := freeAddr(t)
	pageSrv := &http.Server{Addr: pageAddr, Handler: page, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = pageSrv.ListenAndServe() }()
	t.Cleanup(func() { _ = pageSrv.Close() })

	// The gateway: remediation in dry run with an audit file, Kafka's
	// static membership (the restarted gateway takes its partitions back at
	// once), one storage directory for both lives (a StatefulSet pod keeps
	// its volume).
	sink := newLogSink(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	storage := t.TempDir()
	startGateway := func(name string) *process {
		health := freeAddr(t)
		gw := startProcess(t, name, []string{
			"KAFKA_BROKERS=" + brokerAddr,
			"KAFKA_GROUP_INSTANCE_ID=gateway-0",
			"PROMETHEUS_REMOTE_WRITE_URL=" + sink + "/api/v1/write",
			"LOKI_OTLP_ENDPOINT=" + sink,
			"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
			"REMEDIATION_AUDIT_FILE=" + audit,
			"OTELCOL_GPU_STORAGE_DIR=" + storage,
			"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
			"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
		}, gatewayBin, "--config", gatewayConfig)
		waitHTTP(t, "http://"+health+"/", gw)
		return gw
	}
	first := startGateway("gateway-1")

	// The agent reads the page. It writes no fault records of its own (only
	// the gateway writes gpu_faults), so every record there is the gateway's.
	addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
	node := testbed.NodeInputs{Host: host, JobID: "durable-job", GPUUUIDs: page.uuids, PageURL: "http://" + pageAddr + "/metrics",
		SysfsRoot: filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), FRDir: t.TempDir()}
	env, err := node.AgentEnv(brokerAddr, t.TempDir(), addrs, true)
	if err != nil {
		t.Fatal(err)
	}
	agent := startProcess(t, "agent", env, agentBin,
		"--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
	all = append(all, agent, first)
	waitHTTP(t, "http://"+addrs.Health+"/", agent)
	faults := consumeKeyedFaults(t, brokerAddr)

	// The gateway has the baseline of every GPU (DBE counters grow from
	// it) once it read the agent's first scrapes.
	eventually(t, 60*time.Second, "the gateway reads the agent's GPU metrics", func() error {
		return committedOnce(lag, "otelcol-gpu-gateway-detect-metrics", "otlp_metrics")
	}, all...)

	// Latency, gpu_faults writable: XID 13 on the first GPUs one after the
	// other, from the page's change to the open record on gpu_faults.
	var latencies []time.Duration
	for g := 0; g < latencySamples; g++ {
		at := page.set(g, func(s *gpuState) { s.xid = 13 })
		var rec keyedFault
		eventually(t, 60*time.Second, fmt.Sprintf("GPU %d's XID 13 on gpu_faults", g), func() error {
			var ok bool
			rec, ok = faults.opened(page.uuids[g], fault.Type("gpu.xid"))
			if !ok {
				return fmt.Errorf("no open gpu.xid record for %s", page.uuids[g])
			}
			return nil
		}, all...)
		latencies = append(latencies, rec.arrived.Sub(at))
	}
	slices.Sort(latencies)
	t.Logf("signal to gpu_faults (XID 13 on the page to the open record read back): median %s of %v, config %s",
		latencies[len(latencies)/2].Round(10*time.Millisecond), latencies, gatewayConfig)

	// The outage. Faults open one after the other on the next four GPUs.
	if _, err := topicControl(control, http.MethodPut, "gpu_faults"); err != nil {
		t.Fatal(err)
	}
	outageStart := time.Now()
	writable := false
	defer func() {
		if !writable {
			_, _ = topicControl(control, http.MethodDelete, "gpu_faults")
		}
	}()
	injections := []struct {
		gpu  int
		typ  fault.Type
		what string
		set  func(*gpuState)
	}{
		{latencySamples, "gpu.fell_off_bus", "XID 79", func(s *gpuState) { s.xid = 79 }},
		{latencySamples + 1, "gpu.xid", "XID 94", func(s *gpuState) { s.xid = 94 }},
		{latencySamples + 2, "gpu.memory.dbe", "DBE counter 0 -> 2", func(s *gpuState) { s.dbe += 2 }},
		{latencySamples + 3, "gpu.memory.dbe", "XID 48", func(s *gpuState) { s.xid = 48 }},
	}
	for i, in := range injections {
		// Spread over the first half of the outage.
		sleepUntil(outageStart.Add(outage / 2 * time.Duration(i) / time.Duration(len(injections))))
		page.set(in.gpu, in.set)
		t.Logf("%s: %s on GPU %d (%s)", time.Since(outageStart).Round(time.Second), in.what, in.gpu, page.uuids[in.gpu])
	}
	// Detection does not wait on gpu_faults: the gateway commits every
	// input of those faults (their records are in its disk queue) and keeps
	// trying the topic.
	refusedBefore := 0
	if s, err := topicControl(control, http.MethodGet, "gpu_faults"); err == nil {
		refusedBefore = s.Refused
	}
	eventually(t, outage, "the gateway commits the faults' inputs while gpu_faults is unwritable", func() error {
		s, err := topicControl(control, http.MethodGet, "gpu_faults")
		if err != nil {
			return err
		}
		if s.Refused <= refusedBefore {
			return fmt.Errorf("no new produce request refused (%d)", s.Refused)
		}
		return caughtUp(lag,
			loadtest.GroupTopic{Group: "otelcol-gpu-gateway-detect-metrics", Topic: "otlp_metrics"},
			loadtest.GroupTopic{Group: "otelcol-gpu-gateway-detect-logs", Topic: "otlp_logs"})
	}, all...)
	for _, in := range injections {
		if _, ok := faults.opened(page.uuids[in.gpu], in.typ); ok {
			t.Fatalf("%s reached gpu_faults while it was unwritable: the outage is not one", in.what)
		}
	}

	// Kill -9 within the outage, and restart.
	sleepUntil(outageStart.Add(outage * 3 / 4))
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	t.Logf("%s: gateway-1 killed", time.Since(outageStart).Round(time.Second))
	second := startGateway("gateway-2")
	alive := []*process{broker, agent, second}
	sleepUntil(outageStart.Add(outage))
	if _, err := topicControl(control, http.MethodDelete, "gpu_faults"); err != nil {
		t.Fatal(err)
	}
	writable = true
	t.Logf("%s: gpu_faults writable again", time.Since(outageStart).Round(time.Second))

	// Every fault opened during the outage reaches gpu_faults.
	var lost []string
	ids := map[string]string{} // fault.id -> what opened it
	eventually(t, 2*time.Minute, "every fault of the outage on gpu_faults", func() error {
		lost = lost[:0]
		for _, in := range injections {
			rec, ok := faults.opened(page.uuids[in.gpu], in.typ)
			if !ok {
				lost = append(lost, fmt.Sprintf("%s on GPU %d (%s)", in.what, in.gpu, in.typ))
				continue
			}
			ids[rec.ID] = in.what
		}
		if len(lost) > 0 {
			return fmt.Errorf("not on gpu_faults: %s", strings.Join(lost, "; "))
		}
		return nil
	}, alive...)
	for id, what := range ids {
		rec, _ := faults.byID(id)
		t.Logf("%s: fault %s on gpu_faults %s after the outage began (partition %d, key %x)", what, id,
			rec.arrived.Sub(outageStart).Round(100*time.Millisecond), rec.partition, rec.key)
	}

	// Keyed: all records of one fault share a key (so a partition), and
	// different faults have different keys.
	faults.checkKeys(t)

	// Remediation decided on every one of them.
	eventually(t, time.Minute, "every fault of the outage in the remediation audit", func() error {
		seen := map[string]bool{}
		for _, e := range auditEntries(t, audit) {
			seen[e.FaultID] = true
		}
		var missing []string
		for id, what := range ids {
			if !seen[id] {
				missing = append(missing, what+" ("+id+")")
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no audit entry for %s", strings.Join(missing, ", "))
		}
		return nil
	}, alive...)
}

// sleepUntil waits for a point of the test's schedule.
func sleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

// topicControl calls the broker's control endpoint for topic
// (test/kfakebroker).
func topicControl(addr, method, topic string) (topicWriteState, error) {
	var s topicWriteState
	req, err := http.NewRequest(method, "http://"+addr+"/topics/"+topic+"/unwritable", nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("%s %s: status %d", method, req.URL, resp.StatusCode)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

type topicWriteState struct {
	Unwritable bool `json:"unwritable"`
	Refused    int  `json:"refused"`
}

// committedOnce reports whether the group has committed any offset of
// topic: its lag is below that of a group that never committed.
func committedOnce(b *loadtest.Broker, group, topic string) error {
	lags, err := b.Lag(context.Background(), []loadtest.GroupTopic{{Group: group, Topic: topic}, {Group: "e2e-never-committed", Topic: topic}})
	if err != nil {
		return err
	}
	if lags[loadtest.GroupTopic{Group: group, Topic: topic}] >= lags[loadtest.GroupTopic{Group: "e2e-never-committed", Topic: topic}] {
		return fmt.Errorf("group %s has committed nothing of %s", group, topic)
	}
	return nil
}

// caughtUp reports whether every group committed its topic to the end.
func caughtUp(b *loadtest.Broker, gts ...loadtest.GroupTopic) error {
	lags, err := b.Lag(context.Background(), gts)
	if err != nil {
		return err
	}
	if loadtest.TotalLag(lags) > 0 {
		return fmt.Errorf("not committed to the end: %s", loadtest.FormatLag(lags))
	}
	return nil
}

// keyedFault is a fault record read from gpu_faults with its Kafka record's
// key and partition.
type keyedFault struct {
	fault.Record
	key       []byte
	partition int32
	arrived   time.Time
}

type keyedFaults struct {
	mu      sync.Mutex
	records []keyedFault
}

// consumeKeyedFaults reads gpu_faults from the start.
func consumeKeyedFaults(t *testing.T, broker string) *keyedFaults {
	kf := &keyedFaults{}
	consumeFaultRecords(t, broker, func(msg *kgo.Record, records []fault.Record, arrived time.Time) {
		kf.mu.Lock()
		defer kf.mu.Unlock()
		for _, rec := range records {
			kf.records = append(kf.records, keyedFault{Record: rec, key: bytes.Clone(msg.Key), partition: msg.Partition, arrived: arrived})
		}
	})
	return kf
}

// opened is the first open record of a fault of type typ on the GPU.
func (kf *keyedFaults) opened(uuid string, typ fault.Type) (keyedFault, bool) {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	for _, r := range kf.records {
		if r.GPUUUID == uuid && r.Type == typ && r.State == fault.StateOpen {
			return r, true
		}
	}
	return keyedFault{}, false
}

func (kf *keyedFaults) byID(id string) (keyedFault, bool) {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	for _, r := range kf.records {
		if r.ID == id {
			return r, true
		}
	}
	return keyedFault{}, false
}

// checkKeys: every record has a key; one fault's records share key and
// partition; two faults never share a key.
func (kf *keyedFaults) checkKeys(t *testing.T) {
	t.Helper()
	kf.mu.Lock()
	defer kf.mu.Unlock()
	keyOf := map[string]keyedFault{}
	faultOf := map[string]string{}
	for _, r := range kf.records {
		if len(r.key) == 0 {
			t.Errorf("fault %s (%s): record on partition %d without a key", r.ID, r.State, r.partition)
			continue
		}
		if prev, ok := keyOf[r.ID]; ok {
			if !bytes.Equal(prev.key, r.key) || prev.partition != r.partition {
				t.Errorf("fault %s: records keyed %x (partition %d) and %x (partition %d): its records can reorder",
					r.ID, prev.key, prev.partition, r.key, r.partition)
			}
			continue
		}
		keyOf[r.ID] = r
		if other, ok := faultOf[string(r.key)]; ok && other != r.ID {
			t.Errorf("faults %s and %s share the key %x: the key is not the fault's", other, r.ID, r.key)
		}
		faultOf[string(r.key)] = r.ID
	}
	if len(keyOf) < 2 {
		t.Errorf("%d faults on gpu_faults, want several to compare their keys", len(keyOf))
	}
	partitions := map[int32]int{}
	for _, r := range keyOf {
		partitions[r.partition]++
	}
	t.Logf("%d faults on gpu_faults, by partition %v", len(keyOf), partitions)
}

// gpuState is what a simulated GPU's dcgm-exporter page shows.
type gpuState struct {
	xid int
	dbe float64
}

// gpuPage is one node's dcgm-exporter page whose values the test sets.
type gpuPage struct {
	host  string
	uuids []string
	mu    sync.Mutex
	gpus  []gpuState
}

func newGPUPage(host string, n int) *gpuPage {
	p := &gpuPage{host: host, gpus: make([]gpuState, n)}
	for g := 0; g < n; g++ {
		p.uuids = append(p.uuids, fmt.Sprintf("GPU-d0ab1e00-0000-4000-8000-%012d", g))
	}
	return p
}

// set changes one GPU and returns when the page shows the change.
func (p *gpuPage) set(g int, change func(*gpuState)) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	change(&p.gpus[g])
	return time.Now()
}

func (p *gpuPage) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	fields := []struct {
		name, kind string
		value      func(gpuState) float64
	}{
		{"DCGM_FI_DEV_GPU_TEMP", "gauge", func(gpuState) float64 { return 45 }},
		{"DCGM_FI_DEV_GPU_UTIL", "gauge", func(gpuState) float64 { return 90 }},
		{"DCGM_FI_DEV_POWER_USAGE", "gauge", func(gpuState) float64 { return 600 }},
		{"DCGM_FI_DEV_XID_ERRORS", "gauge", func(s gpuState) float64 { return float64(s.xid) }},
		{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", func(gpuState) float64 { return 0 }},
		{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", func(s gpuState) float64 { return s.dbe }},
	}
	for _, f := range fields {
		fmt.Fprintf(&b, "# HELP %s simulated\n# TYPE %s %s\n", f.name, f.name, f.kind)
		for g, s := range p.gpus {
			fmt.Fprintf(&b, "%s{gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"%s\"} %g\n",
				f.name, g, p.uuids[g], g, p.host, f.value(s))
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}
