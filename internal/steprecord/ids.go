package steprecord

import (
	"crypto/sha256"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The contract's ids (docs/training-scripts.md, "Ids anyone can compute"):
// anyone who knows the job, the attempt, the step and the rank computes the
// same trace and span ids, so every rank's span of a step lands in one trace
// without coordination. Step, rank and attempt are written in decimal.

// TraceID of a step: SHA-256(job + "\x00" + attempt + "\x00" + step)[:16].
func TraceID(job string, attempt, step int64) pcommon.TraceID {
	sum := sha256.Sum256([]byte(idPrefix(job, attempt, step)))
	var id pcommon.TraceID
	copy(id[:], sum[:16])
	return id
}

// RankSpanID of a rank's step span:
// SHA-256(job + "\x00" + attempt + "\x00" + step + "\x00" + rank)[:8].
func RankSpanID(job string, attempt, step, rank int64) pcommon.SpanID {
	return spanID(idPrefix(job, attempt, step) + "\x00" + strconv.FormatInt(rank, 10))
}

// RootSpanID of the step's root span, the rank spans' parent:
// SHA-256(job + "\x00" + attempt + "\x00" + step + "\x00root")[:8].
func RootSpanID(job string, attempt, step int64) pcommon.SpanID {
	return spanID(idPrefix(job, attempt, step) + "\x00root")
}

func idPrefix(job string, attempt, step int64) string {
	return job + "\x00" + strconv.FormatInt(attempt, 10) + "\x00" + strconv.FormatInt(step, 10)
}

func spanID(s string) pcommon.SpanID {
	sum := sha256.Sum256([]byte(s))
	var id pcommon.SpanID
	copy(id[:], sum[:8])
	return id
}
