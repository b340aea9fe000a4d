package invariant

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

// issueRecord is the log record of issue 29: its resource names host.name
// twice (this node, then the victim) and gpu.uuid twice (this node's GPU,
// then the victim's), the record event.name twice (step.note, then
// gpu.unresponsive).
func issueRecord(base time.Time) request {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("host.name", ownHost)
	res.PutStr(otlpmaptest.Repeat("host.name"), victimHost)
	res.PutStr("gpu.uuid", ownGPUs[0])
	res.PutStr(otlpmaptest.Repeat("gpu.uuid"), victimGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(base))
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Attributes().PutStr("event.name", "step.note")
	lr.Attributes().PutStr(otlpmaptest.Repeat("event.name"), "gpu.unresponsive")
	ld = otlpmaptest.Logs(ld)
	return request{logs: &ld}
}

// genuineXID is an XID 79 on the node's GPU 0 from its own GPU receiver.
func genuineXID(base time.Time) request {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", ownHost)
	rl.Resource().Attributes().PutStr("gpu.uuid", ownGPUs[0])
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver")
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(base))
	lr.SetEventName("gpu.xid")
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Attributes().PutStr("event.name", "gpu.xid")
	lr.Attributes().PutInt("gpu.xid", 79)
	return request{logs: &ld, own: true}
}

// fakeJob is an 8-rank job's ten steps, one request per step, rank 3
// computing 2.5x slower; claim sets each rank's host.name and gpu.uuid on
// its resource (and may name them again on its span).
func fakeJob(base time.Time, job string, claim func(res, span pcommon.Map, rank int)) []request {
	const ranks, slow = 8, 3
	var out []request
	for step := range 10 {
		start := base.Add(time.Duration(step) * 3 * time.Second)
		td := ptrace.NewTraces()
		for rank := range ranks {
			rs := td.ResourceSpans().AppendEmpty()
			res := rs.Resource().Attributes()
			res.PutStr("service.name", "train.py")
			res.PutStr("training.job.id", job)
			res.PutInt("training.attempt", 0)
			res.PutInt("training.rank", int64(rank))
			res.PutInt("training.world_size", ranks)
			res.PutInt("training.pp_stage", 0)
			sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			sp.SetName("train.step")
			d := time.Second + time.Duration(rank*7+step*3)*time.Millisecond
			if rank == slow {
				d = 2500 * time.Millisecond
			}
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(d)))
			a := sp.Attributes()
			a.PutInt("iteration.step", int64(step))
			a.PutInt("training.phase.forward_ns", int64(d*3/10))
			a.PutInt("training.phase.backward_ns", int64(d*6/10))
			a.PutInt("training.phase.optimizer_ns", int64(d/10))
			a.PutDouble("training.loss", 2.0)
			claim(res, a, rank)
		}
		td = otlpmaptest.Traces(td)
		out = append(out, request{traces: &td})
	}
	return out
}

// honest: every rank on this node, on one of its GPUs.
func honest(res, _ pcommon.Map, rank int) {
	res.PutStr("host.name", ownHost)
	res.PutStr("gpu.uuid", ownGPUs[rank%2])
}

// Issue 29, hole 1, in process: the issue's log record and a fake job whose
// slow rank's resource names host.name twice (this node, then the victim)
// are refused at the agent, counted under repeated_key; nothing names the
// victim. The positive controls: a genuine XID 79 from the agent's own GPU
// receiver opens its fault, and the same job, honest, opens a straggler
// fault on this node.
func TestIssue29RepeatedKeys(t *testing.T) {
	base := time.Now()
	reqs := []request{issueRecord(base)}
	reqs = append(reqs, fakeJob(base, "job-liar", func(res, span pcommon.Map, rank int) {
		honest(res, span, rank)
		if rank == 3 {
			res.PutStr(otlpmaptest.Repeat("host.name"), victimHost)
		}
	})...)
	reqs = append(reqs, genuineXID(base))
	out, err := runCase(reqs, base)
	require.NoError(t, err)
	assert.Equal(t, 11, out.refused, "the record's request and the ten steps' requests")
	assert.Equal(t, int64(1+80), out.rejected["repeated_key"], "the record, and every span of the ten refused requests")
	var types []fault.Type
	for _, r := range out.faults {
		types = append(types, r.Type)
		assert.NotEqual(t, "job-liar", r.JobID, "the liar's job opened %s", r.Type)
	}
	assert.Contains(t, types, fault.TypeGPUFellOffBus, "the genuine XID 79 opens its fault")

	out, err = runCase(fakeJob(base, "job-honest", honest), base)
	require.NoError(t, err)
	var straggler []fault.Record
	for _, r := range out.faults {
		if r.Type == fault.TypeStragglerCompute && r.State == fault.StateOpen {
			straggler = append(straggler, r)
		}
	}
	require.Len(t, straggler, 1, "the honest job's slow rank: %v", out.faults)
	assert.Equal(t, ownHost, straggler[0].HostName)
	assert.Equal(t, ownGPUs[1], straggler[0].GPUUUID, "rank 3's GPU")
	assert.Equal(t, int64(3), straggler[0].Rank)
}

// The readers decide as provenance judged. For fake jobs whose ranks claim
// any node and GPU in canonical maps (on the resource, on the span, both),
// the fault the straggler and correlator open for the slow rank names the
// host and GPU that the provenance processor's output holds for it, read
// with Map.Get (the span's, else the resource's). And a map that never
// passed an agent's edge (a Kafka producer's, keys named twice) is read by
// its first entries, as Map.Get reads it.
func TestReadersAgreeWithProvenance(t *testing.T) {
	hosts := []string{ownHost, victimHost, ""}
	gpus := []string{ownGPUs[0], ownGPUs[1], victimGPU, ""}
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 1))
		claims := [8][4]string{}
		for rank := range claims {
			for i, list := range [][]string{hosts, gpus, hosts, gpus} {
				claims[rank][i] = list[r.IntN(len(list))]
			}
		}
		put := func(m pcommon.Map, k, v string) {
			if v != "" {
				m.PutStr(k, v)
			}
		}
		reqs := fakeJob(time.Now(), "job-claims", func(res, span pcommon.Map, rank int) {
			c := claims[rank]
			put(res, "host.name", c[0])
			put(res, "gpu.uuid", c[1])
			put(span, "host.name", c[2])
			put(span, "gpu.uuid", c[3])
		})
		w, err := newWorld()
		require.NoError(t, err)
		require.NoError(t, w.scrapeOwnGPUs(time.Now()))
		for _, req := range reqs {
			require.NoError(t, w.send(req))
		}
		// What provenance passed on for rank 3, read with Map.Get.
		var host, gpu string
		for _, td := range w.tap.traces {
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				rs := td.ResourceSpans().At(i)
				if v, _ := rs.Resource().Attributes().Get("training.rank"); v.Int() != 3 {
					continue
				}
				span := rs.ScopeSpans().At(0).Spans().At(0).Attributes()
				host, gpu = get(span, rs.Resource().Attributes(), "host.name"), get(span, rs.Resource().Attributes(), "gpu.uuid")
			}
		}
		require.NoError(t, w.finishAgent())
		found := false
		for _, ld := range w.faults.AllLogs() {
			records, bad := fault.FromLogs(ld)
			require.Empty(t, bad)
			for _, rec := range records {
				if rec.Type != fault.TypeStragglerCompute || rec.Rank != 3 {
					continue
				}
				found = true
				assert.Equal(t, host, rec.HostName, "seed %d: claims %v", seed, claims[3])
				assert.Equal(t, gpu, rec.GPUUUID, "seed %d: claims %v", seed, claims[3])
			}
		}
		assert.True(t, found, "seed %d: no straggler fault for rank 3", seed)
		assert.Equal(t, ownHost, host, "seed %d: provenance stamps the node", seed)
		assert.True(t, gpu == "" || slices.Contains(ownGPUs, gpu), "seed %d: provenance keeps only the node's GPUs: %q", seed, gpu)
		require.NoError(t, w.shutdown())
	}

	// Straight onto the topic, as a Kafka producer with the agents'
	// credentials could: rank 3's resource names the victim first, the
	// span its GPU twice. The fault names what Map.Get reads.
	w, err := newWorld()
	require.NoError(t, err)
	for _, req := range fakeJob(time.Now(), "job-direct", func(res, span pcommon.Map, rank int) {
		honest(res, span, rank)
		if rank == 3 {
			res.Remove("host.name")
			res.PutStr("host.name", victimHost)
			res.PutStr(otlpmaptest.Repeat("host.name"), ownHost)
			span.PutStr("gpu.uuid", victimGPU)
			span.PutStr(otlpmaptest.Repeat("gpu.uuid"), ownGPUs[0])
		}
	}) {
		require.NoError(t, w.kafkaTraces.ConsumeTraces(context.Background(), *req.traces))
	}
	require.NoError(t, w.finishAgent())
	found := false
	for _, ld := range w.faults.AllLogs() {
		records, _ := fault.FromLogs(ld)
		for _, rec := range records {
			if rec.Type == fault.TypeStragglerCompute && rec.Rank == 3 {
				found = true
				assert.Equal(t, victimHost, rec.HostName, "the resource's first host.name")
				assert.Equal(t, victimGPU, rec.GPUUUID, "the span's first gpu.uuid")
			}
		}
	}
	assert.True(t, found, "no straggler fault for the direct job's rank 3")
	require.NoError(t, w.shutdown())
}

// get is key's string on span, else on res, as Map.Get reads each.
func get(span, res pcommon.Map, key string) string {
	if v, ok := span.Get(key); ok && v.Str() != "" {
		return v.Str()
	}
	v, _ := res.Get(key)
	return v.Str()
}

// The in-process pipelines are the shipped ones (pipeline_test.go).
func TestPipelinesAsShipped(t *testing.T) {
	agent, gateway, err := configs()
	require.NoError(t, err)
	for _, p := range []string{"logs/scripts", "metrics/scripts", "traces/scripts"} {
		procs, exps := agent.pipeline(p)
		assert.Equal(t, agentScripts, procs, p)
		assert.Equal(t, []string{"forward/scripts"}, exps, p)
	}
	procs, exps := agent.pipeline("logs")
	assert.Equal(t, agentLogs, procs)
	assert.ElementsMatch(t, []string{"kafka", "steplogs"}, exps)
	procs, _ = agent.pipeline("metrics")
	assert.Equal(t, agentMetrics, procs)
	procs, _ = agent.pipeline("traces")
	assert.Equal(t, agentTraces, procs)
	procs, exps = gateway.pipeline("traces")
	assert.Equal(t, gatewayTrace, procs)
	assert.Contains(t, exps, "faultcorrelator")
	for _, p := range []string{"metrics/detect", "logs/detect"} {
		procs, exps := gateway.pipeline(p)
		assert.Equal(t, []string{"memory_limiter"}, procs, p)
		assert.Equal(t, []string{"faultcorrelator"}, exps, p)
	}
}
