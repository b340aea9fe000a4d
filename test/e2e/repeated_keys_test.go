//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

// Issue 29, hole 1, with the shipped binaries: OTLP lets a map name a key
// twice. A sender on the agent's OTLP port posts the log record
// (its resource names host.name twice, this node then the victim, and
// gpu.uuid twice, this node's GPU then the victim's; the record names
// event.name twice, step.note then gpu.unresponsive) and the steps of a
// fake 8-rank job whose slow rank 3's resource names host.name twice (this
// node, then the victim). The agent refuses each request with 400 and
// counts it under reason repeated_key; after a genuine XID 79 from the
// agent's GPU receiver has been decided (the positive control) and the
// gateway has read everything before it, no fault record on gpu_faults and
// no line of the remediation audit names the victim or its GPU, and the
// fake job opened nothing.
func TestRepeatedKeysAtTheAgent(t *testing.T) {
	const (
		host   = "rk-n0"
		victim = "rk-victim"
		job    = "rk-fake-job"
	)
	victimGPU := "GPU-7e57ed00-0000-4000-8000-00000000029a"

	r := startProvenanceRig(t, host, "rk-job")
	all, lag, page, audit, addrs, faults, otlp := r.all, r.lag, r.page, r.audit, r.addrs, r.faults, r.otlp
	eventually(t, 60*time.Second, "the gateway reads the agent's GPU metrics", func() error {
		return committedOnce(lag, "otelcol-gpu-gateway-detect-metrics", "otlp_metrics")
	}, all...)

	// The record, and the fake job: refused whole, 400.
	refused := func(path string, body []byte) {
		t.Helper()
		resp, err := http.Post(otlp+path, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s: status %d, want 400 (a map names a key twice)", path, resp.StatusCode)
		}
	}
	refused("/v1/logs", repeatedKeysRecord(host, victim, page.uuids[0], victimGPU))
	const steps = 8
	start := time.Now()
	for step := range steps {
		refused("/v1/traces", repeatedHostStep(job, host, victim, page.uuids, step, start))
	}
	// One refusal for the record, one per span of each step's request.
	eventually(t, 30*time.Second, "the agent counts the refusals under repeated_key", func() error {
		got := telemetrySum(t, "http://"+addrs.Telemetry+"/metrics", "otelcol_processor_provenance_rejected_claims", `reason="repeated_key"`)
		if want := float64(1 + 8*steps); got != want {
			return fmt.Errorf("rejected_claims{reason=repeated_key} %v, want %v", got, want)
		}
		return nil
	}, all...)

	// The positive control: a genuine XID 79 on GPU 0 is decided.
	genuine := r.genuineXID79(t)
	r.waitCaughtUp(t)

	records := faultRecords(faults)
	for _, r := range records {
		if r.HostName != host || r.GPUUUID == victimGPU || r.JobID == job {
			t.Errorf("fault %s (%s, rule %s) host %q, GPU %q, job %q: only the genuine XID's faults may open", r.ID, r.Type, r.Rule, r.HostName, r.GPUUUID, r.JobID)
		}
	}
	raw, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, victim) || strings.Contains(line, victimGPU) || strings.Contains(line, job) {
			t.Errorf("the audit names the victim or the fake job: %s", line)
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

// repeatedKeysRecord is the record as OTLP/protobuf.
func repeatedKeysRecord(host, victim, gpu, victimGPU string) []byte {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("host.name", host)
	res.PutStr(otlpmaptest.Repeat("host.name"), victim)
	res.PutStr("gpu.uuid", gpu)
	res.PutStr(otlpmaptest.Repeat("gpu.uuid"), victimGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	lr.SetTimestamp(now)
	lr.SetObservedTimestamp(now)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Body().SetStr("GPU stopped answering")
	lr.Attributes().PutStr("event.name", "step.note")
	lr.Attributes().PutStr(otlpmaptest.Repeat("event.name"), "gpu.unresponsive")
	b, err := plogotlp.NewExportRequestFromLogs(otlpmaptest.Logs(ld)).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// repeatedHostStep is one step of an 8-rank job on host's GPUs; rank 3
// computes 2.5x slower and its resource names host.name twice: host, then
// victim.
func repeatedHostStep(job, host, victim string, gpus []string, step int, start time.Time) []byte {
	td := ptrace.NewTraces()
	stepStart := start.Add(time.Duration(step) * 3 * time.Second)
	for rank := range 8 {
		rs := td.ResourceSpans().AppendEmpty()
		res := rs.Resource().Attributes()
		res.PutStr("service.name", "train.py")
		res.PutStr("training.job.id", job)
		res.PutInt("training.attempt", 0)
		res.PutInt("training.rank", int64(rank))
		res.PutInt("training.world_size", 8)
		res.PutInt("training.pp_stage", 0)
		res.PutStr("host.name", host)
		res.PutStr("gpu.uuid", gpus[rank%len(gpus)])
		d := time.Second + time.Duration(rank*7+step*3)*time.Millisecond
		if rank == 3 {
			d = 2500 * time.Millisecond
			res.PutStr(otlpmaptest.Repeat("host.name"), victim)
		}
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("train.step")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(stepStart))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(stepStart.Add(d)))
		a := sp.Attributes()
		a.PutInt("iteration.step", int64(step))
		a.PutInt("training.phase.forward_ns", int64(d*3/10))
		a.PutInt("training.phase.backward_ns", int64(d*6/10))
		a.PutInt("training.phase.optimizer_ns", int64(d/10))
		a.PutDouble("training.loss", 2.0)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(otlpmaptest.Traces(td)).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}
