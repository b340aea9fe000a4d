package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import "go.opentelemetry.io/collector/pdata/ptrace"

// rankSpanIdentity decodes whose span sp is: its resource's identity (res)
// overridden by the span's own attributes (host, GPU, IB port, job, rank;
// where.read). isRank is false for a span that names no rank. It is the one
// place the span path decodes a rank's identity, so that the step-record
// reader (internal/steprecord) can take its place in one change.
func rankSpanIdentity(res where, sp ptrace.Span) (w where, isRank bool) {
	w = res
	w.read(sp.Attributes())
	return w, w.rankKnown
}
