package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pvalue"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Names of the training contract (docs/training-scripts.md) that
// internal/semconv does not hold.
const (
	stepSpanName   = "train.step"
	attrAttempt    = "training.attempt"
	attrDataloadNs = "training.phase.dataload_ns"
	attrTokens     = "training.tokens"
	attrFlops      = "training.flops"
)

const (
	// maxJobIDBytes: longer job ids are garbage, and each would become a
	// map key and a resource.
	maxJobIDBytes = 256
	// maxStepDuration: a longer "step" is a broken timestamp, and would
	// skew the histogram's sum forever.
	maxStepDuration = 24 * time.Hour
)

// dropReason says why a train.step span was not used at all.
type dropReason int

const (
	dropMissingIdentity  dropReason = iota // job, step or rank absent or not an integer
	dropJobIDTooLong                       // over maxJobIDBytes
	dropInvalidDuration                    // end not after start, or over maxStepDuration
	dropRankOutOfRange                     // rank < 0, >= max_ranks or >= the step's world size
	dropDuplicateRank                      // the rank's record of this step arrived before
	dropLate                               // the step was already closed
	dropTooManyJobs                        // max_jobs reached
	dropTooManyOpenSteps                   // max_open_steps reached and the step is older than all open ones
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	"missing_identity", "job_id_too_long", "invalid_duration", "rank_out_of_range",
	"duplicate_rank", "late", "too_many_jobs", "too_many_open_steps",
}

// Reasons an attribute of a used span is ignored.
const (
	skipNotNumeric = "not_numeric"
	skipNotFinite  = "not_finite"
	skipNegative   = "negative"
	skipOutOfRange = "out_of_range"
	skipMissing    = "missing" // gpu.model absent while training.flops is sent
	skipUnknown    = "unknown" // gpu.model not in the peak table
	skipMIG        = "mig"     // a MIG slice: the whole GPU's peak would not apply
)

type skipKey struct {
	attribute string
	reason    string
}

// stepRecord is what one rank's train.step span says about one step.
type stepRecord struct {
	job       string
	attempt   int64
	step      int64
	rank      int64
	worldSize int64 // 0: unknown
	duration  time.Duration

	hasTokens bool
	tokens    float64

	hasDataloadShare bool
	dataloadShare    float64 // dataload_ns / duration, 0..1

	hasFlops bool // flops reported and the GPU's peak known
	flops    float64
	peak     float64 // FLOP/s
}

// readRecord reads a train.step span and the resource it came with.
// Attributes are looked up on the span first, then on the resource, as the
// stepspan processor does. skip is called for each attribute ignored.
func readRecord(span ptrace.Span, res pcommon.Map, maxRanks int64, peaks *peakTable, skip func(attribute, reason string)) (stepRecord, dropReason, bool) {
	attrs := span.Attributes()
	var r stepRecord
	job, ok := lookup(attrs, res, semconv.AttrTrainingJobID)
	if !ok || job.Type() != pcommon.ValueTypeStr || job.Str() == "" {
		return r, dropMissingIdentity, false
	}
	if len(job.Str()) > maxJobIDBytes {
		return r, dropJobIDTooLong, false
	}
	r.job = job.Str()
	var hasStep, hasRank bool
	r.step, hasStep = intAttr(attrs, res, semconv.AttrIterationStep)
	r.rank, hasRank = intAttr(attrs, res, semconv.AttrTrainingRank)
	if !hasStep || !hasRank || r.step < 0 {
		return r, dropMissingIdentity, false
	}
	if _, present := lookup(attrs, res, attrAttempt); present {
		if r.attempt, ok = intAttr(attrs, res, attrAttempt); !ok || r.attempt < 0 {
			return r, dropMissingIdentity, false // a garbage attempt must not merge into attempt 0
		}
	}
	if r.rank < 0 || r.rank >= maxRanks {
		return r, dropRankOutOfRange, false
	}
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if end <= start || end-start > pcommon.Timestamp(maxStepDuration) {
		return r, dropInvalidDuration, false
	}
	r.duration = time.Duration(end - start)

	if _, present := lookup(attrs, res, semconv.AttrTrainingWorldSize); present {
		ws, ok := intAttr(attrs, res, semconv.AttrTrainingWorldSize)
		switch {
		case !ok:
			skip(semconv.AttrTrainingWorldSize, skipNotNumeric)
		case ws <= 0 || ws > maxRanks:
			skip(semconv.AttrTrainingWorldSize, skipOutOfRange)
		case r.rank >= ws:
			return r, dropRankOutOfRange, false
		default:
			r.worldSize = ws
		}
	}
	if v, ok := numberAttr(attrs, res, attrTokens, skip); ok {
		r.hasTokens, r.tokens = true, v
	}
	if v, ok := numberAttr(attrs, res, attrDataloadNs, skip); ok {
		if share := v / float64(r.duration); share <= 1 {
			r.hasDataloadShare, r.dataloadShare = true, share
		} else {
			skip(attrDataloadNs, skipOutOfRange) // data loading longer than the step
		}
	}
	if v, ok := numberAttr(attrs, res, attrFlops, skip); ok {
		r.peak = gpuPeak(attrs, res, peaks, skip)
		r.hasFlops, r.flops = r.peak > 0, v
	}
	return r, 0, true
}

// gpuPeak is the peak FLOP/s of the rank's GPU, 0 (and counted) when it
// cannot be known.
func gpuPeak(attrs, res pcommon.Map, peaks *peakTable, skip func(attribute, reason string)) float64 {
	if _, mig := lookup(attrs, res, semconv.AttrGPUMIGProfile); mig {
		skip(semconv.AttrGPUModel, skipMIG)
		return 0
	}
	model, ok := lookup(attrs, res, semconv.AttrGPUModel)
	if !ok || model.Type() != pcommon.ValueTypeStr || model.Str() == "" {
		skip(semconv.AttrGPUModel, skipMissing)
		return 0
	}
	peak := peaks.lookup(model.Str())
	if peak == 0 {
		skip(semconv.AttrGPUModel, skipUnknown)
	}
	return peak
}

func lookup(span, res pcommon.Map, key string) (pcommon.Value, bool) {
	if v, ok := span.Get(key); ok {
		return v, true
	}
	return res.Get(key)
}

// intAttr reads an integer: an int, or a double holding an integer (JSON
// encoders send those).
func intAttr(span, res pcommon.Map, key string) (int64, bool) {
	v, ok := lookup(span, res, key)
	if !ok {
		return 0, false
	}
	return pvalue.Int(v)
}

// numberAttr reads a finite, non-negative number. Absent: false, not
// counted; present but unusable: false, counted.
func numberAttr(span, res pcommon.Map, key string, skip func(attribute, reason string)) (float64, bool) {
	v, ok := lookup(span, res, key)
	if !ok {
		return 0, false
	}
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	case pcommon.ValueTypeDouble:
		f = v.Double()
	default:
		skip(key, skipNotNumeric)
		return 0, false
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		skip(key, skipNotFinite)
		return 0, false
	case f < 0:
		skip(key, skipNegative)
		return 0, false
	}
	return f, true
}
