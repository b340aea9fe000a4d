package provenanceprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

// Before anything is judged or renamed, every request passes the
// canonical-form check (internal/otlpmap): a map that names a key twice
// would be judged by its first entry here and read by its second elsewhere
// (issue 29), so no such map gets through, at any level. A record (log
// record, span, data point) with one is dropped whole, never repaired; a
// scope's map drops the scope's records; a resource's map refuses the
// whole request with a permanent error, which the OTLP receiver answers
// with InvalidArgument (gRPC) or 400 (HTTP), so the sender learns it and
// does not retry. Each refused record is counted under its own reason
// (repeated_key, too_deep) and the first of each reason is logged.

// canonicalReasons are the counter's options for each otlpmap.Kind.
var canonicalReasons = func() (opts [otlpmap.NumKinds]metric.AddOption) {
	for k, name := range canonicalReasonNames {
		if name != "" {
			opts[k] = metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, name)))
		}
	}
	return opts
}()

// canonicalReasonNames are the reasons counted for each otlpmap.Kind.
var canonicalReasonNames = [otlpmap.NumKinds]string{
	otlpmap.RepeatedKey: metadata.ReasonRepeatedKey,
	otlpmap.TooDeep:     metadata.ReasonTooDeep,
}

// canonicalWarned: the first refusal of each kind is logged, once per
// processor instance.
type canonicalWarned [otlpmap.NumKinds]atomic.Bool

// canonical counts and logs what a Filter call refused and says whether the
// request goes on: not when it is refused (err, permanent) nor when
// nothing is left of it (left, the records that remain, is 0).
func (p *provenance) canonical(ctx context.Context, r otlpmap.Report, left int) (goOn bool, err error) {
	if r.Refused() == 0 {
		return true, nil
	}
	for k, n := range r.Records {
		if n == 0 || canonicalReasons[k] == nil {
			continue
		}
		p.tb.RejectedClaims.Add(ctx, int64(n), canonicalReasons[k])
		if !p.canonWarned[k].Swap(true) {
			what := "records refused"
			if r.Refuse {
				what = "request refused: it is in a resource's attributes"
			}
			p.logger.Warn("provenanceprocessor: an OTLP sender's data is not in canonical form (a map repeats a key, or nests too deep); "+what+" (logged once per reason, counted in otelcol_processor_provenance_rejected_claims)",
				zap.String("reason", canonicalReasonNames[k]), zap.Int("records", n), zap.String("host.name", p.host),
				zap.Stringer("example", r.First))
		}
	}
	if r.Refuse {
		return false, consumererror.NewPermanent(status.Error(codes.InvalidArgument,
			fmt.Sprintf("provenanceprocessor: %s in a resource's attributes: request refused (each key at most once per map)", r.First)))
	}
	return left > 0, nil
}
