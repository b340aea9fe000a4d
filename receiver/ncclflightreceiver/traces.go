package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"crypto/sha256"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

// collectiveTraceID joins the spans of one collective across every rank:
// the same (job, process group, sequence) gives the same trace id on every
// node, without coordination.
func collectiveTraceID(job, pg, kind string, seq int64) pcommon.TraceID {
	sum := sha256.Sum256([]byte(job + "\x00" + pg + "\x00" + kind + "\x00" + strconv.FormatInt(seq, 10)))
	var id pcommon.TraceID
	copy(id[:], sum[:16])
	return id
}

// spanID names one rank's record of one operation.
func spanID(job string, rank int, source, pg string, record int64) pcommon.SpanID {
	sum := sha256.Sum256([]byte(job + "\x00" + strconv.Itoa(rank) + "\x00" + source + "\x00" + pg + "\x00" + strconv.FormatInt(record, 10)))
	var id pcommon.SpanID
	copy(id[:], sum[:8])
	return id
}

// dtypeBytes is the width of torch's dtype names as the flight recorder
// writes them.
var dtypeBytes = map[string]int64{
	"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
	"Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16,
	"Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "UInt64": 8, "UInt32": 4,
}

// messageBytes is the size of the tensors the rank hands to the collective;
// 0 when a dtype is unknown.
func messageBytes(sizes [][]int64, dtypes []string) int64 {
	var total int64
	for i, shape := range sizes {
		if i >= len(dtypes) {
			return 0
		}
		width, ok := dtypeBytes[dtypes[i]]
		if !ok {
			return 0
		}
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		total += n * width
	}
	return total
}

// collectiveName turns "nccl:all_reduce" into "all_reduce" and
// "nccl:send 1->2" into "send".
func collectiveName(profilingName string) string {
	_, name, ok := strings.Cut(profilingName, ":")
	if !ok {
		name = profilingName
	}
	name, _, _ = strings.Cut(name, " ")
	return name
}

// p2pPeer parses the peer of "nccl:send 1->2" (2) or "nccl:recv 3<-0" (0).
func p2pPeer(profilingName string) (int, bool) {
	_, rest, ok := strings.Cut(profilingName, " ")
	if !ok {
		return 0, false
	}
	for _, sep := range []string{"->", "<-"} {
		if _, peer, ok := strings.Cut(rest, sep); ok {
			n, err := strconv.Atoi(strings.TrimSpace(peer))
			return n, err == nil
		}
	}
	return 0, false
}

// rankResource holds what all spans of one rank share.
type rankResource struct {
	host string
	job  string
	// attempt is training.attempt when hasAttempt: the dump's path named it
	// (flight_recorder::job_path).
	attempt    int64
	hasAttempt bool
	rank       int
	worldSize  int
}

func (r rankResource) putTo(m pcommon.Map) {
	if r.host != "" {
		m.PutStr(semconv.AttrHostName, r.host)
	}
	if r.job != "" {
		m.PutStr(semconv.AttrTrainingJobID, r.job)
	}
	if r.hasAttempt {
		m.PutInt(semconv.AttrTrainingAttempt, r.attempt)
	}
	if r.rank >= 0 {
		m.PutInt(semconv.AttrTrainingRank, int64(r.rank))
	}
	if r.worldSize > 0 {
		m.PutInt(semconv.AttrTrainingWorldSize, int64(r.worldSize))
	}
}

// traceJob is the job as trace and span ids hold it: a restarted attempt
// counts its collectives from 1 again, so attempts after the first are part
// of it (attempt 0 keeps the ids a job without attempts has).
func (r rankResource) traceJob() string {
	if r.attempt > 0 {
		return r.job + "\x00attempt=" + strconv.FormatInt(r.attempt, 10)
	}
	return r.job
}

// newRankTraces starts a ptrace.Traces with the rank's resource and scope.
func newRankTraces(res rankResource, version string) (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	return td, appendRankSpans(td, res, version)
}

// appendRankSpans adds a rank's resource to td and returns its span slice.
func appendRankSpans(td ptrace.Traces, res rankResource, version string) ptrace.SpanSlice {
	rs := td.ResourceSpans().AppendEmpty()
	res.putTo(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	ss.Scope().SetVersion(version)
	return ss.Spans()
}

// entrySpan writes one flight-recorder entry as a span: start at the
// watchdog's discovered start (else the enqueue), end at start + the
// CUDA-event duration when timing is on, else at the discovered completion.
// A collective that timed out or never completed has status Error.
func entrySpan(span ptrace.Span, res rankResource, e *analysis.Op) {
	kind, seq := "collective", e.CollectiveSeqID
	if e.IsP2P {
		kind, seq = "p2p", e.P2PSeqID
	}
	span.SetTraceID(collectiveTraceID(res.traceJob(), e.PGName, kind, seq))
	span.SetSpanID(spanID(res.traceJob(), res.rank, semconv.NCCLSourceFlightRecorder, e.PGName, e.RecordID))
	span.SetName(e.ProfilingName)
	span.SetKind(ptrace.SpanKindInternal)
	start := e.TimeCreatedNs
	if e.TimeDiscoveredStartedNs > 0 {
		start = e.TimeDiscoveredStartedNs
	}
	end := start
	switch {
	case e.HasDuration:
		end = start + int64(e.DurationMs*float64(time.Millisecond))
	case e.TimeDiscoveredCompletedNs > start:
		end = e.TimeDiscoveredCompletedNs
	}
	span.SetStartTimestamp(pcommon.Timestamp(max(start, 0)))
	span.SetEndTimestamp(pcommon.Timestamp(max(end, start, 0)))

	a := span.Attributes()
	a.EnsureCapacity(16)
	a.PutStr(semconv.AttrNCCLSource, semconv.NCCLSourceFlightRecorder)
	a.PutStr(semconv.AttrNCCLCollective, collectiveName(e.ProfilingName))
	a.PutInt(semconv.AttrNCCLRecordID, e.RecordID)
	a.PutInt(semconv.AttrNCCLOpID, e.OpID)
	if e.IsP2P {
		a.PutInt(semconv.AttrNCCLP2PSeq, e.P2PSeqID)
		if peer, ok := p2pPeer(e.ProfilingName); ok {
			a.PutInt(semconv.AttrNCCLP2PPeer, int64(peer))
		}
	} else {
		a.PutInt(semconv.AttrNCCLCollectiveSeq, e.CollectiveSeqID)
	}
	a.PutInt(semconv.AttrNCCLPGID, e.PGID)
	a.PutStr(semconv.AttrNCCLPGName, e.PGName)
	if e.PGDesc != "" {
		a.PutStr(semconv.AttrNCCLPGDesc, e.PGDesc)
	}
	if n := messageBytes(e.InputSizes, e.InputDtypes); n > 0 {
		a.PutInt(semconv.AttrNCCLMessageBytes, n)
	}
	if len(e.InputDtypes) > 0 {
		a.PutStr(semconv.AttrNCCLDtypes, strings.Join(e.InputDtypes, ","))
	}
	a.PutStr(semconv.AttrNCCLState, e.State)
	if e.TimeoutMs > 0 {
		a.PutInt(semconv.AttrNCCLTimeoutMs, e.TimeoutMs)
	}
	timing := "watchdog"
	if e.HasDuration {
		timing = "cuda_event"
	}
	a.PutStr(semconv.AttrNCCLTimingSource, timing)

	switch {
	case e.TimedOut():
		span.Status().SetCode(ptrace.StatusCodeError)
		span.Status().SetMessage("timed out: retired by the watchdog without completing")
	case e.State != frdump.StateCompleted:
		span.Status().SetCode(ptrace.StatusCodeError)
		span.Status().SetMessage("not completed: " + e.State)
	}
}

// inspectorSpan writes one NCCL inspector record as a span.
func inspectorSpan(span ptrace.Span, job string, r *inspector.Record) {
	kind := "collective"
	if r.Kind == inspector.KindP2P {
		kind = "p2p"
	}
	span.SetTraceID(collectiveTraceID(job, r.CommID, kind, r.Seq))
	span.SetSpanID(spanID(job, r.Rank, semconv.NCCLSourceInspector, r.CommID, r.Seq))
	span.SetName(r.Op)
	start, end := inspectorTimes(r)
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	a := span.Attributes()
	a.PutStr(semconv.AttrNCCLSource, semconv.NCCLSourceInspector)
	a.PutStr(semconv.AttrNCCLCollective, r.Op)
	a.PutStr(semconv.AttrNCCLCommID, r.CommID)
	if kind == "p2p" {
		a.PutInt(semconv.AttrNCCLP2PSeq, r.Seq)
		if r.Peer >= 0 {
			a.PutInt(semconv.AttrNCCLP2PPeer, int64(r.Peer))
		}
	} else {
		a.PutInt(semconv.AttrNCCLCollectiveSeq, r.Seq)
	}
	a.PutInt(semconv.AttrNCCLMessageBytes, r.MsgBytes)
	if r.TimingSource != "" {
		a.PutStr(semconv.AttrNCCLTimingSource, r.TimingSource)
	}
	if !isNaN(r.BusBWGBs) {
		a.PutDouble(semconv.AttrNCCLBusBandwidth, r.BusBWGBs)
	}
	if !isNaN(r.AlgoBWGBs) {
		a.PutDouble(semconv.AttrNCCLAlgoBandwidth, r.AlgoBWGBs)
	}
}

// inspectorTimes prefers the kernels' own start and stop, then the
// collective's event trace, and falls back to the line's dump time minus the
// execution time.
func inspectorTimes(r *inspector.Record) (time.Time, time.Time) {
	switch {
	case !r.KernelStart.IsZero() && r.KernelStop.After(r.KernelStart):
		return r.KernelStart, r.KernelStop
	case !r.Start.IsZero() && r.ExecTime > 0:
		return r.Start, r.Start.Add(r.ExecTime)
	default:
		return r.DumpTimestamp.Add(-r.ExecTime), r.DumpTimestamp
	}
}

func isNaN(f float64) bool { return f != f }
