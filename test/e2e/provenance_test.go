//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/loadtest"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// provenanceRig is what the provenance tests run: the Kafka-protocol
// broker, the gateway (dry run, its audit in a file) and one agent whose
// GPU receiver reads a dcgm-exporter page of four GPUs of host, with the
// shipped configs; faults consumes gpu_faults, otlp is the agent's OTLP/HTTP.
type provenanceRig struct {
	brokerAddr string
	all        []*process
	lag        *loadtest.Broker
	page       *gpuPage
	audit      string
	addrs      testbed.AgentAddrs
	faults     *keyedFaults
	otlp       string
	frDir      string // the agent's flight-recorder directory (NCCL_FR_DIR)
}

func startProvenanceRig(t *testing.T, host, jobID string) *provenanceRig {
	t.Helper()
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	all := []*process{broker}
	lag, err := loadtest.ConnectBroker(brokerAddr, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lag.Close)

	page := newGPUPage(host, 4)
	pageAddr := freeAddr(t)
	pageSrv := &http.Server{Addr: pageAddr, Handler: page, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = pageSrv.ListenAndServe() }()
	t.Cleanup(func() { _ = pageSrv.Close() })

	sink := newLogSink(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	gwHealth := freeAddr(t)
	gateway := startProcess(t, "gateway", []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"PROMETHEUS_REMOTE_WRITE_URL=" + sink + "/api/v1/write",
		"LOKI_OTLP_ENDPOINT=" + sink,
		"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
		"STRAGGLER_DECISION_WAIT=1500ms",
		"REMEDIATION_AUDIT_FILE=" + audit,
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
	}, gatewayBin, "--config", filepath.Join(root, "distributions", "gateway", "config.yaml"))
	all = append(all, gateway)
	waitHTTP(t, "http://"+gwHealth+"/", gateway)

	addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
	node := testbed.NodeInputs{Host: host, JobID: jobID, GPUUUIDs: page.uuids, PageURL: "http://" + pageAddr + "/metrics",
		SysfsRoot: filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), FRDir: t.TempDir()}
	env, err := node.AgentEnv(brokerAddr, t.TempDir(), addrs, true)
	if err != nil {
		t.Fatal(err)
	}
	agent := startProcess(t, "agent", env, agentBin, "--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
	all = append(all, agent)
	waitHTTP(t, "http://"+addrs.Health+"/", agent)
	faults := consumeKeyedFaults(t, brokerAddr)
	otlp := "http://" + addrs.OTLPHTTP
	return &provenanceRig{brokerAddr: brokerAddr, all: all, lag: lag, page: page, audit: audit, addrs: addrs,
		faults: faults, otlp: otlp, frDir: node.FRDir}
}

// genuineXID79 is the positive control: a genuine XID 79 on GPU 0 through
// the agent's GPU receiver opens a fault on gpu_faults, which remediation
// decides (its audit names it).
func (r *provenanceRig) genuineXID79(t *testing.T) keyedFault {
	t.Helper()
	r.page.set(0, func(s *gpuState) { s.xid = 79 })
	var genuine keyedFault
	eventually(t, 90*time.Second, "the genuine XID 79 on gpu_faults", func() error {
		for _, f := range faultRecords(r.faults) {
			if f.GPUUUID == r.page.uuids[0] && f.State == fault.StateOpen {
				genuine = f
				return nil
			}
		}
		return fmt.Errorf("no open record for GPU 0 (%s)", r.page.uuids[0])
	}, r.all...)
	eventually(t, 60*time.Second, "remediation decides the genuine fault", func() error {
		for _, e := range auditEntries(t, r.audit) {
			if e.FaultID == genuine.ID {
				return nil
			}
		}
		return fmt.Errorf("no audit entry for fault %s yet", genuine.ID)
	}, r.all...)
	return genuine
}

// waitCaughtUp waits until the gateway's detection and remediation have
// read everything the agent sent.
func (r *provenanceRig) waitCaughtUp(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, "the gateway reads everything", func() error {
		return caughtUp(r.lag,
			loadtest.GroupTopic{Group: "otelcol-gpu-gateway-detect-metrics", Topic: "otlp_metrics"},
			loadtest.GroupTopic{Group: "otelcol-gpu-gateway-detect-logs", Topic: "otlp_logs"},
			loadtest.GroupTopic{Group: "otelcol-gpu-gateway-traces", Topic: "otlp_spans"},
			loadtest.GroupTopic{Group: "otelcol-gpu-remediation", Topic: "gpu_faults"})
	}, r.all...)
}

// An agent speaks only for its own node (issue 18). A sender on the real
// agent's OTLP port claims another node: an XID 79 record, a volatile DBE
// counter growing 0 -> 3, and a fake 8-rank job whose rank 3 runs on the
// victim 2.5x slower. The same sender then names the agent's own node and
// its real GPUs (XID 79, DBE). Only after that does a genuine XID 79 reach
// the agent through its GPU receiver (a dcgm-exporter page). Once the
// real gateway has decided the genuine fault (dry-run audit) and has read
// everything before it, nothing on gpu_faults and nothing in the audit
// names the victim, no fault opened on the GPUs the sender named, and the
// agent's provenance counter says what it renamed.
func TestProvenanceAtTheAgent(t *testing.T) {
	const (
		host   = "prov-n0"
		victim = "prov-victim"
		job    = "prov-fake-job"
	)
	victimGPU := "GPU-7e57ed00-0000-4000-8000-000000000000"

	r := startProvenanceRig(t, host, "prov-job")
	all, lag, page, audit, addrs, faults, otlp := r.all, r.lag, r.page, r.audit, r.addrs, r.faults, r.otlp
	agentTelemetry := "http://" + addrs.Telemetry + "/metrics"

	// The gateway holds every GPU's baseline (a DBE count grows from it),
	// and the agent's inventory its GPUs, once a scrape went through.
	eventually(t, 60*time.Second, "the gateway reads the agent's GPU metrics", func() error {
		return committedOnce(lag, "otelcol-gpu-gateway-detect-metrics", "otlp_metrics")
	}, all...)

	// The attack on the victim.
	postOTLP(t, otlp+"/v1/logs", xid79(victim, victimGPU))
	postOTLP(t, otlp+"/v1/metrics", dbeCounter(victim, victimGPU, 0))
	postOTLP(t, otlp+"/v1/metrics", dbeCounter(victim, victimGPU, 3))
	stepsStart := time.Now()
	for step := 0; step < 8; step++ {
		postOTLP(t, otlp+"/v1/traces", slowRank3Step(job, victim, victimGPU, step, stepsStart))
	}
	// The same sender naming this node and its real GPUs 1 and 2.
	postOTLP(t, otlp+"/v1/logs", xid79(host, page.uuids[1]))
	postOTLP(t, otlp+"/v1/metrics", dbeCounter(host, page.uuids[2], 0))
	postOTLP(t, otlp+"/v1/metrics", dbeCounter(host, page.uuids[2], 3))

	// The agent renamed the claims. host.name: the XID record, the two
	// DBE readings and rank 3's 8 steps claim the victim (the own-node
	// sends claim the agent's name: not counted). gpu: the same resources
	// name the victim's GPU; GPUs 1 and 2 are the node's own. Hardware
	// signals: each XID record's event name, event.name, gpu.xid and
	// gpu.xid.source (2 x 4), each DBE reading's metric name and
	// gpu.ecc.type (4 x 2).
	want := map[string]float64{"host_name": 11, "gpu": 11, "hardware_signal": 16}
	eventually(t, 30*time.Second, "the agent counts the forged claims", func() error {
		got := map[string]float64{}
		for reason := range want {
			got[reason] = telemetrySum(t, agentTelemetry, "otelcol_processor_provenance_rejected_claims", `reason="`+reason+`"`)
		}
		for reason, n := range want {
			if got[reason] != n {
				return fmt.Errorf("rejected claims %v, want %v", got, want)
			}
		}
		return nil
	}, all...)

	// The positive control, after the attack: a genuine XID 79 on GPU 0
	// through the agent's GPU receiver opens a fault and reaches
	// remediation.
	genuine := r.genuineXID79(t)
	if genuine.HostName != host {
		t.Errorf("the genuine fault names host %q, want %q", genuine.HostName, host)
	}
	// The slow rank did reach the straggler detection: its fault opens,
	// naming the node whose agent received its spans.
	eventually(t, 90*time.Second, "a straggler fault of the fake job", func() error {
		for _, r := range faultRecords(faults) {
			if r.JobID == job && strings.HasPrefix(string(r.Type), "straggler.") {
				return nil
			}
		}
		return fmt.Errorf("no straggler fault of %s yet", job)
	}, all...)
	// Everything the agent sent before the control has been read by the
	// gateway's detection and by remediation.
	r.waitCaughtUp(t)

	records := faultRecords(faults)
	for _, r := range records {
		if r.HostName == victim || r.GPUUUID == victimGPU {
			t.Errorf("fault %s (%s, rule %s) names the victim: host %q, GPU %q", r.ID, r.Type, r.Rule, r.HostName, r.GPUUUID)
		}
		if r.GPUUUID == page.uuids[1] || r.GPUUUID == page.uuids[2] {
			t.Errorf("fault %s (%s, rule %s) on GPU %s, which only the OTLP sender named", r.ID, r.Type, r.Rule, r.GPUUUID)
		}
		if r.JobID == job && r.HostName != host {
			t.Errorf("fault %s (%s) of the fake job names host %q, want the agent's %q", r.ID, r.Type, r.HostName, host)
		}
	}
	raw, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, victim) || strings.Contains(line, victimGPU) {
			t.Errorf("the audit names the victim: %s", line)
		}
	}
	t.Logf("%d fault records on gpu_faults, %d audit lines; genuine fault %s (%s)",
		len(records), strings.Count(string(raw), "\n"), genuine.ID, genuine.Type)
	if t.Failed() {
		for _, p := range all {
			p.dumpLog(t, 40)
		}
	}
}

// faultRecords is every record read from gpu_faults so far.
func faultRecords(kf *keyedFaults) []keyedFault {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	return append([]keyedFault(nil), kf.records...)
}

// postOTLP sends one OTLP/HTTP protobuf request and requires a 200.
func postOTLP(t *testing.T, url string, body []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: status %d", url, resp.StatusCode)
	}
}

// xid79 is an XID 79 record as the dcgm receiver writes it.
func xid79(host, uuid string) []byte {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", host)
	rl.Resource().Attributes().PutStr("gpu.uuid", uuid)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	lr.SetTimestamp(now)
	lr.SetObservedTimestamp(now)
	lr.SetEventName("gpu.xid")
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Body().SetStr("XID 79: GPU has fallen off the bus")
	lr.Attributes().PutStr("event.name", "gpu.xid")
	lr.Attributes().PutInt("gpu.xid", 79)
	lr.Attributes().PutStr("gpu.xid.source", "kmsg")
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// dbeStart is the start of the sender's cumulative DBE series.
var dbeStart = pcommon.NewTimestampFromTime(time.Now())

// dbeCounter is one reading of gpu.ecc.errors{gpu.ecc.type=dbe_volatile}.
func dbeCounter(host, uuid string, value int64) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", host)
	rm.Resource().Attributes().PutStr("gpu.uuid", uuid)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("gpu.ecc.errors")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(dbeStart)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	dp.SetIntValue(value)
	dp.Attributes().PutStr("gpu.ecc.type", "dbe_volatile")
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// slowRank3Step is one step of an 8-rank job as scripts send it: rank 3
// claims the victim node and its GPU and computes 2.5x slower.
func slowRank3Step(job, victim, victimGPU string, step int, start time.Time) []byte {
	td := ptrace.NewTraces()
	stepStart := start.Add(time.Duration(step) * 3 * time.Second)
	for rank := 0; rank < 8; rank++ {
		rs := td.ResourceSpans().AppendEmpty()
		res := rs.Resource().Attributes()
		res.PutStr("service.name", "train.py")
		res.PutStr("training.job.id", job)
		res.PutInt("training.attempt", 0)
		res.PutInt("training.rank", int64(rank))
		res.PutInt("training.local_rank", int64(rank))
		res.PutInt("training.world_size", 8)
		// One data-parallel stage: the label says the ranks are peers.
		// Unlabelled, a rank slow from the job's first step would be taken
		// as a stage of its own (issue 20) and never a straggler.
		res.PutInt("training.pp_stage", 0)
		res.PutInt("process.pid", int64(4000+rank))
		// Healthy ranks differ a little, as real ones do (the robust
		// rule scales by their spread).
		d := time.Second + time.Duration(rank*7+step*3)*time.Millisecond
		if rank == 3 {
			d = 2500 * time.Millisecond
			res.PutStr("host.name", victim)
			res.PutStr("gpu.uuid", victimGPU)
		}
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("train.step")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(stepStart))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(stepStart.Add(d)))
		a := sp.Attributes()
		a.PutInt("iteration.step", int64(step))
		a.PutInt("training.phase.dataload_ns", int64(d/10))
		a.PutInt("training.phase.forward_ns", int64(d*3/10))
		a.PutInt("training.phase.backward_ns", int64(d*5/10))
		a.PutInt("training.phase.optimizer_ns", int64(d/10))
		a.PutDouble("training.loss", 2.0)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}
