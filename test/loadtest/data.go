package loadtest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// Topics of docs/architecture.md.
const (
	TopicSpans   = "otlp_spans"
	TopicMetrics = "otlp_metrics"
	TopicLogs    = "otlp_logs"
	TopicFaults  = "gpu_faults"
)

// Shape is the cluster whose agents the generator stands in for. Every
// message is what one agent's batch processor sends: one node's rank spans
// of one step, one node's scrape of its GPUs and InfiniBand port, or a
// handful of its log records.
type Shape struct {
	Jobs         int // concurrent training jobs
	NodesPerJob  int // 8 GPUs (ranks) each
	GPUsPerNode  int
	Seed         uint64
	StepPeriod   time.Duration // data time between two steps
	LogsPerBatch int
}

// DefaultShape: 16 jobs of 64 ranks, a step every 1.5 s.
func DefaultShape() Shape {
	return Shape{Jobs: 16, NodesPerJob: 8, GPUsPerNode: 8, Seed: 1, StepPeriod: 1500 * time.Millisecond, LogsPerBatch: 16}
}

func (s Shape) ranks() int { return s.NodesPerJob * s.GPUsPerNode }

func (s Shape) jobID(j int) string { return fmt.Sprintf("load-job-%02d", j) }

func (s Shape) host(j, n int) string { return fmt.Sprintf("load-j%02d-n%02d", j, n) }

// Which steps carry what the tail sampler must keep. Deterministic in
// (job, step) so that a test can count what it must find at Tempo.
const (
	errorEvery    = 200 // one rank span of every 200th step fails (status ERROR)
	evidenceEvery = 97  // one rank span of every 97th step carries ECC evidence
	slowEvery     = 151 // every 151st step all ranks wait 4x longer (a checkpoint)
	stragglerJob  = 0   // the job with a compute straggler ...
	stragglerRank = 13  // ... on this rank ...
	stragglerFrom = 10  // ... from this step on
)

// IsErrorStep says whether rank 0's span of (job, step) has status ERROR.
func IsErrorStep(job, step int) bool { return (job*7+step)%errorEvery == errorEvery-1 }

func isEvidenceStep(job, step int) bool { return (job*13+step)%evidenceEvery == evidenceEvery/2 }

// isSlowStep: the straggler processor marks the step's root step.slow (more
// than 3x the job's recent mean), so tail sampling keeps it.
func isSlowStep(job, step int) bool { return step > 30 && (job*11+step)%slowEvery == slowEvery/2 }

// SpanMessages emits the step-span messages of n spans at least (whole
// node batches): every job steps in turn, each node's 8 rank spans one
// message keyed by the job id, as the agent's kafka exporter keys them.
// It also returns how many spans have status ERROR.
func (s Shape) SpanMessages(n int, base time.Time, emit func(*kgo.Record) error) (spans, errorSpans int, err error) {
	rng := rand.New(rand.NewPCG(s.Seed, 1))
	var m ptrace.ProtoMarshaler
	for step := 0; spans < n; step++ {
		start := base.Add(time.Duration(step) * s.StepPeriod)
		for j := 0; j < s.Jobs && spans < n; j++ {
			job := s.jobID(j)
			for nd := 0; nd < s.NodesPerJob; nd++ {
				td := ptrace.NewTraces()
				for g := 0; g < s.GPUsPerNode; g++ {
					rank := nd*s.GPUsPerNode + g
					isErr := rank == 0 && IsErrorStep(j, step)
					if isErr {
						errorSpans++
					}
					s.appendRankSpan(td, rng, j, nd, g, step, start, isErr)
				}
				b, e := m.MarshalTraces(td)
				if e != nil {
					return 0, 0, fmt.Errorf("loadtest: encoding spans: %w", e)
				}
				if e := emit(&kgo.Record{Topic: TopicSpans, Key: []byte(job), Value: b}); e != nil {
					return 0, 0, e
				}
				spans += s.GPUsPerNode
			}
		}
	}
	return spans, errorSpans, nil
}

// appendRankSpan is one rank's train.step span as stepspanprocessor sends
// it: the contract's ids, the phases, the collectives' summary and the
// GPU's and port's health (docs/training-scripts.md).
func (s Shape) appendRankSpan(td ptrace.Traces, rng *rand.Rand, j, nd, g, step int, start time.Time, isErr bool) {
	id := steprecord.Identity{Job: s.jobID(j), Step: int64(step), Rank: int64(nd*s.GPUsPerNode + g)}
	rs := td.ResourceSpans().AppendEmpty()
	steprecord.PutResource(rs.Resource().Attributes(), steprecord.Resource{
		Service: "train.py", Host: s.host(j, nd), Job: id.Job, HasAttempt: true, Rank: id.Rank,
		LocalRank: int64(g), WorldSize: int64(s.ranks()), GPU: fmt.Sprintf("GPU-%s-%d", s.host(j, nd), g),
	})
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("otelcol_gpu_step")
	sp := ss.Spans().AppendEmpty()
	sp.SetName(semconv.SpanTrainStep)
	sp.SetKind(ptrace.SpanKindInternal)
	sp.SetTraceID(id.TraceID())
	sp.SetParentSpanID(id.RootSpanID())
	sp.SetSpanID(id.RankSpanID())

	compute := time.Duration(float64(900*time.Millisecond) * (1 + rng.NormFloat64()*0.03))
	if j == stragglerJob && id.Rank == stragglerRank && step >= stragglerFrom {
		compute = compute * 23 / 10
	}
	dataload := 30*time.Millisecond + time.Duration(rng.IntN(int(5*time.Millisecond)))
	wait := s.StepPeriod - compute - dataload
	if wait < 10*time.Millisecond {
		wait = 10 * time.Millisecond
	}
	if isSlowStep(j, step) {
		wait += 3 * s.StepPeriod // every rank waits on a peer's checkpoint
	}
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(dataload + compute + wait)))
	a := sp.Attributes()
	a.PutInt(semconv.AttrIterationStep, int64(step))
	steprecord.PutPhase(a, "dataload", dataload)
	steprecord.PutPhase(a, "forward", compute*3/10)
	steprecord.PutPhase(a, "backward", compute*6/10)
	steprecord.PutPhase(a, "optimizer", compute-compute*3/10-compute*6/10)
	a.PutDouble(semconv.AttrTrainingLoss, 2.1-float64(step)*1e-4+rng.Float64()*0.01)
	a.PutInt(semconv.AttrTrainingTokens, 4096*8)
	// The collectives' summary and the health as the agent's stepspan
	// processor writes them, less the attributes the gateway does not read
	// (the longest collective's name, the offsets).
	a.PutInt(semconv.AttrCollectivesCount, 24)
	a.PutInt(semconv.AttrCollectivesTotalNs, int64(wait))
	a.PutInt(semconv.AttrCollectivesMaxNs, int64(wait/6))
	a.PutDouble(semconv.AttrHealthTemperature, 62+rng.Float64()*8)
	a.PutDouble(semconv.AttrHealthSMActive, 0.8+rng.Float64()*0.05)
	a.PutInt(semconv.AttrHealthThrottle, 0)
	a.PutInt(semconv.AttrHealthECCDBE, 0)
	sbe := int64(0)
	if g == 0 && isEvidenceStep(j, step) {
		sbe = 1
	}
	a.PutInt(semconv.AttrHealthECCSBE, sbe)
	a.PutInt(semconv.AttrHealthNVLinkCRC, 0)
	a.PutInt(semconv.AttrHealthIBLinkDowned, 0)
	a.PutInt(semconv.AttrHealthIBSymbol, 0)
	a.PutInt(semconv.AttrHealthWindowS, 10)
	if isErr {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("loadtest: injected step failure")
	}
}

// gpuGauges and gpuSums are the per-GPU fields of one dcgm scrape, named
// as dcgmreceiver names them.
var (
	gpuGauges = []string{semconv.MetricHWTemperature, semconv.MetricHWGPUUtilization, semconv.MetricHWPower, semconv.MetricHWGPUMemoryUsage, semconv.MetricHWGPUMemoryUtilization,
		semconv.MetricGPUClockFrequency, semconv.MetricGPUProfActive, semconv.MetricGPUProfSMOccupancy, semconv.MetricGPUClockThrottle, semconv.MetricGPUXIDLast, semconv.MetricGPUPowerLimit}
	gpuSums = []string{semconv.MetricGPUECCErrors, semconv.MetricGPUNVLinkErrors, semconv.MetricGPUPCIeReplays, semconv.MetricHWEnergy, semconv.MetricGPUProfNVLinkIO, semconv.MetricGPUProfPCIeIO}
	ibSums  = []string{semconv.MetricHWNetworkIO, semconv.MetricHWNetworkPackets, semconv.MetricHWErrors, semconv.MetricIBPortXmitWait, semconv.MetricIBPortHWCounter}
)

// MetricMessages emits messages of at least n data points: each is one
// node's scrape (every GPU's fields and its InfiniBand port's counters),
// keyed by the node as partition_metrics_by_resource_attributes spreads
// them.
func (s Shape) MetricMessages(n int, base time.Time, emit func(*kgo.Record) error) (points int, err error) {
	var m pmetric.ProtoMarshaler
	for scrape := 0; points < n; scrape++ {
		ts := pcommon.NewTimestampFromTime(base.Add(time.Duration(scrape) * 10 * time.Second))
		for j := 0; j < s.Jobs && points < n; j++ {
			for nd := 0; nd < s.NodesPerJob; nd++ {
				md := s.scrape(j, nd, scrape, ts)
				b, e := m.MarshalMetrics(md)
				if e != nil {
					return 0, fmt.Errorf("loadtest: encoding metrics: %w", e)
				}
				if e := emit(&kgo.Record{Topic: TopicMetrics, Key: []byte(s.host(j, nd)), Value: b}); e != nil {
					return 0, e
				}
				points += md.DataPointCount()
			}
		}
	}
	return points, nil
}

func (s Shape) scrape(j, nd, scrape int, ts pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	host := s.host(j, nd)
	for g := 0; g < s.GPUsPerNode; g++ {
		rm := md.ResourceMetrics().AppendEmpty()
		res := rm.Resource().Attributes()
		res.PutStr(semconv.AttrHostName, host)
		res.PutStr(semconv.AttrGPUUUID, fmt.Sprintf("GPU-%s-%d", host, g))
		res.PutInt(semconv.AttrGPUIndex, int64(g))
		res.PutStr(semconv.AttrGPUModel, "NVIDIA H100 80GB HBM3")
		res.PutStr(semconv.AttrGPUDevice, fmt.Sprintf("nvidia%d", g))
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver")
		for i, name := range gpuGauges {
			dp := gauge(sm, name)
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(float64(50 + i + g))
		}
		for i, name := range gpuSums {
			dp := sum(sm, name)
			dp.SetTimestamp(ts)
			dp.SetIntValue(int64(scrape * (i + 1)))
		}
	}
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr(semconv.AttrHostName, host)
	res.PutStr(semconv.AttrIBDevice, "mlx5_0")
	res.PutStr(semconv.AttrIBPort, "1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver")
	for i, name := range ibSums {
		for _, dir := range []string{"transmit", "receive"} {
			dp := sum(sm, name)
			dp.SetTimestamp(ts)
			dp.Attributes().PutStr(semconv.AttrNetworkIODirection, dir)
			dp.SetIntValue(int64(scrape) << (20 + i))
		}
	}
	return md
}

func gauge(sm pmetric.ScopeMetrics, name string) pmetric.NumberDataPoint {
	m := sm.Metrics().AppendEmpty()
	m.SetName(name)
	return m.SetEmptyGauge().DataPoints().AppendEmpty()
}

func sum(sm pmetric.ScopeMetrics, name string) pmetric.NumberDataPoint {
	m := sm.Metrics().AppendEmpty()
	m.SetName(name)
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	return s.DataPoints().AppendEmpty()
}

// LogMessages emits messages of at least n log records: NCCL flight-
// recorder findings and kernel lines an agent forwards, LogsPerBatch a
// message.
func (s Shape) LogMessages(n int, base time.Time, emit func(*kgo.Record) error) (records int, err error) {
	var m plog.ProtoMarshaler
	per := max(s.LogsPerBatch, 1)
	for batch := 0; records < n; batch++ {
		j, nd := batch%s.Jobs, (batch/s.Jobs)%s.NodesPerJob
		host := s.host(j, nd)
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr(semconv.AttrHostName, host)
		rl.Resource().Attributes().PutStr(semconv.AttrTrainingJobID, s.jobID(j))
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver")
		for i := 0; i < per; i++ {
			lr := sl.LogRecords().AppendEmpty()
			lr.SetTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(batch*per+i) * time.Millisecond)))
			lr.SetSeverityNumber(plog.SeverityNumberInfo)
			lr.Body().SetStr(fmt.Sprintf("nccl: collective all_reduce seq %d completed in %d us on rank %d", batch*per+i, 900+i, i%8))
			lr.Attributes().PutStr("nccl.op", "all_reduce")
			lr.Attributes().PutInt(semconv.AttrTrainingRank, int64(i%8))
		}
		b, e := m.MarshalLogs(ld)
		if e != nil {
			return 0, fmt.Errorf("loadtest: encoding logs: %w", e)
		}
		if e := emit(&kgo.Record{Topic: TopicLogs, Key: []byte(host), Value: b}); e != nil {
			return 0, e
		}
		records += per
	}
	return records, nil
}
