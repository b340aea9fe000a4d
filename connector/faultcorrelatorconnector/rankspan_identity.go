package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import "go.opentelemetry.io/collector/pdata/ptrace"

// rankSpanIdentity decodes whose span sp is: its resource's identity (res)
// overridden by the span's own attributes (host, GPU, IB port, job, rank;
// where.read, which reads the job and the rank as internal/steprecord's
// contract says: a rank sent as 5.0 is rank 5, "5" is none). isRank is
// false for a span that names no rank.
func rankSpanIdentity(res where, sp ptrace.Span) (w where, isRank bool) {
	w = res
	w.read(sp.Attributes())
	return w, w.rankKnown
}
