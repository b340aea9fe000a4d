package testbed

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// StepRecord is one rank's finished step as a training script reports it
// (docs/training-scripts.md). The testbed's own OTLP step spans (the
// default) and Options.StepSink are both built from these values.
type StepRecord struct {
	JobID string
	// Attempt is 0: the simulated jobs never restart.
	Attempt                    int
	Rank, LocalRank, WorldSize int
	Host                       string
	GPUUUID                    string
	// PPStage is the rank's pipeline stage when HasPPStage (scenarios with
	// noise.pp_stages).
	PPStage    int
	HasPPStage bool
	Step       int
	Start, End time.Time
	// Phases in the contract's order, by contract phase name (dataload,
	// forward, backward, optimizer): attribute training.phase.<name>_ns.
	Phases []PhaseTime
	// Loss is NaN from a loss_nan injection on.
	Loss float64
	// Attributes are the step's other attributes, in order:
	// training.phase.comm_wait_ns (but under overlap: legacy), then
	// nccl.collectives.count and nccl.collectives.total_ns in runs of more
	// than 512 ranks (step spans alone carry the collectives there).
	Attributes []IntAttribute
}

// PhaseTime is how long a step spent in one phase.
type PhaseTime struct {
	Name     string // the contract's phase name: "forward"
	Duration time.Duration
}

// IntAttribute is an integer attribute of a step.
type IntAttribute struct {
	Key   string
	Value int64
}

// StepSink takes one node's step records of one step in place of the
// testbed's own OTLP sender (Options.StepSink). It is called from the
// goroutine that drives the job, once per node and step; an error ends
// the run.
type StepSink func(ctx context.Context, host string, records []StepRecord) error

// nodeRecords are the step records of one node's ranks.
type nodeRecords struct {
	host    string
	records []StepRecord
}

// stepRecords are the ranks' records of a step, by node, leaving out the
// ranks of silent nodes.
func (j *job) stepRecords(step int, start, end time.Time, ranks []rankStep, withCollectives bool) []nodeRecords {
	// One backing array for every rank's phases and attributes: at 16,384
	// ranks a step would otherwise be 32,768 small allocations.
	phases := make([]PhaseTime, 0, len(ranks)*len(basePhases))
	attrPerRank := 0
	if withCollectives {
		attrPerRank = 2
	}
	// Every simulated phase is the rank's own compute (the waits are in the
	// collectives), so the spans say so with training.phase.comm_wait_ns, as
	// the phase contract asks; only the legacy contract (backward including
	// the wait) leaves it out.
	commWait := j.sc.Overlap != OverlapLegacy
	if commWait {
		attrPerRank++
	}
	attrs := make([]IntAttribute, 0, len(ranks)*attrPerRank)
	out := make([]nodeRecords, 0, len(j.nodes))
	for _, nd := range j.nodes {
		if nd.isSilent() {
			continue
		}
		nr := nodeRecords{host: nd.host}
		for _, r := range ranks {
			if r.node != nd.index {
				continue
			}
			// the node's clock: lag and skew (scenarios.yaml: data_lag, clock_skew)
			off := j.clockOffset(r.node)
			rankEnd := end
			if j.sc.timed() {
				rankEnd = start.Add(r.end)
			}
			rec := StepRecord{
				JobID: j.id, Rank: r.rank, LocalRank: r.gpu, WorldSize: j.sc.Ranks(),
				Host: nd.host, GPUUUID: j.gpuUUID(r.node, r.gpu), PPStage: r.ppStage, HasPPStage: r.hasStage,
				Step: step, Start: start.Add(off), End: rankEnd.Add(off), Loss: r.loss,
			}
			first := len(phases)
			for p, ph := range basePhases {
				phases = append(phases, PhaseTime{Name: ph.name, Duration: r.phases[p]})
			}
			rec.Phases = phases[first:len(phases):len(phases)]
			first = len(attrs)
			if commWait {
				attrs = append(attrs, IntAttribute{Key: semconv.AttrPhaseCommWaitNs, Value: int64(r.commWait)})
			}
			if withCollectives {
				var total time.Duration
				for _, c := range r.collectives {
					total += c
				}
				attrs = append(attrs,
					IntAttribute{Key: semconv.AttrCollectivesCount, Value: collectivesPerStep},
					IntAttribute{Key: semconv.AttrCollectivesTotalNs, Value: int64(total)})
			}
			if len(attrs) > first {
				rec.Attributes = attrs[first:len(attrs):len(attrs)]
			}
			nr.records = append(nr.records, rec)
		}
		out = append(out, nr)
	}
	return out
}

// hostTraces are step spans of one node's ranks.
type hostTraces struct {
	host string
	td   ptrace.Traces
}

// stepSpans builds the records' train.step spans as the Python SDK sends
// them (docs/training-scripts.md), one batch per node.
func stepSpans(nodes []nodeRecords) []hostTraces {
	out := make([]hostTraces, 0, len(nodes))
	for _, nr := range nodes {
		td := ptrace.NewTraces()
		for i := range nr.records {
			appendStepSpan(td, &nr.records[i])
		}
		out = append(out, hostTraces{host: nr.host, td: td})
	}
	return out
}

func appendStepSpan(td ptrace.Traces, rec *StepRecord) {
	rs := td.ResourceSpans().AppendEmpty()
	// No training.attempt: the simulated jobs never restart, and readers
	// take an absent attempt as 0, as from a script that leaves it out.
	steprecord.PutResource(rs.Resource().Attributes(), steprecord.Resource{
		Service: "train", Host: rec.Host, Job: rec.JobID, Rank: int64(rec.Rank), LocalRank: int64(rec.LocalRank),
		WorldSize: int64(rec.WorldSize), GPU: rec.GPUUUID, Stage: int64(rec.PPStage), HasStage: rec.HasPPStage,
	})
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("otelcol_gpu_step")
	sp := ss.Spans().AppendEmpty()
	sp.SetName(semconv.SpanTrainStep)
	sp.SetKind(ptrace.SpanKindInternal)
	// Random ids: the agent's stepspan processor gives every step span the
	// contract's ids, so these never reach the gateway.
	sp.SetTraceID(randomTraceID())
	sp.SetSpanID(randomSpanID())
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(rec.Start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(rec.End))
	a := sp.Attributes()
	a.PutInt(semconv.AttrIterationStep, int64(rec.Step))
	for _, ph := range rec.Phases {
		steprecord.PutPhase(a, ph.Name, ph.Duration)
	}
	a.PutDouble(semconv.AttrTrainingLoss, rec.Loss)
	for _, at := range rec.Attributes {
		a.PutInt(at.Key, at.Value)
	}
}
