package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// The measures of a step this connector turns into metrics.
const (
	attrDataloadNs = semconv.AttrPhaseDataloadNs
	attrTokens     = semconv.AttrTrainingTokens
	attrFlops      = semconv.AttrTrainingFlops
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
	dropMissingIdentity  dropReason = iota // no identity (steprecord): job, step or rank absent or not of the contract's type, attempt garbage
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

// readRecord reads a train.step span and the resource it came with: the
// identity and the world size as steprecord reads them (the span's value,
// else the resource's), the measures looked up on the span first, then on
// the resource. skip is called for each attribute ignored.
func readRecord(span ptrace.Span, res pcommon.Map, maxRanks int64, peaks *peakTable, skip func(attribute, reason string)) (stepRecord, dropReason, bool) {
	attrs := span.Attributes()
	var r stepRecord
	rec := steprecord.Read(attrs, res)
	id, err := rec.Identity()
	if err != nil {
		if e := (*steprecord.Error)(nil); errors.As(err, &e) && e.Field == steprecord.FieldRank && e.Reason == steprecord.ReasonNegative {
			return r, dropRankOutOfRange, false
		}
		return r, dropMissingIdentity, false
	}
	if len(id.Job) > maxJobIDBytes {
		return r, dropJobIDTooLong, false
	}
	r.job, r.attempt, r.step, r.rank = id.Job, id.Attempt, id.Step, id.Rank
	if r.rank >= maxRanks {
		return r, dropRankOutOfRange, false
	}
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if end <= start || end-start > pcommon.Timestamp(maxStepDuration) {
		return r, dropInvalidDuration, false
	}
	r.duration = time.Duration(end - start)

	if ws := rec.Int(steprecord.FieldWorldSize); rec.Has(steprecord.FieldWorldSize) || rec.Wrong().Has(steprecord.FieldWorldSize) {
		switch {
		case !rec.Has(steprecord.FieldWorldSize):
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
