package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

// router decodes one Kafka record and hands it to the next consumer. It
// holds no state between records.
type router struct {
	next   consumer.Logs
	obs    *receiverhelper.ObsReport
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
}

var (
	refusedUndecodable = metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, metadata.ReasonUndecodable)))
	refusedPermanent   = metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, metadata.ReasonPermanent)))
)

// route returns nil when the record is done with (delivered, or refused for
// good: logged and counted) and its offset may be committed, and the next
// consumer's retryable error otherwise.
func (r *router) route(ctx context.Context, rec *kgo.Record) error {
	var un plog.ProtoUnmarshaler
	ld, err := un.UnmarshalLogs(rec.Value)
	if err != nil {
		r.refuse(ctx, rec, metadata.ReasonUndecodable, err)
		return nil
	}
	if ld.LogRecordCount() == 0 {
		r.tb.GpuFaultsRecordsDelivered.Add(ctx, 1)
		return nil // nothing to act on
	}
	ctx = withRecordInfo(ctx, rec)
	obsCtx := r.obs.StartLogsOp(ctx)
	n := ld.LogRecordCount()
	err = r.next.ConsumeLogs(obsCtx, ld)
	r.obs.EndLogsOp(obsCtx, "otlp_proto", n, err)
	switch {
	case err == nil:
		r.tb.GpuFaultsRecordsDelivered.Add(ctx, 1)
		return nil
	case consumererror.IsPermanent(err):
		r.refuse(ctx, rec, metadata.ReasonPermanent, err)
		return nil
	default:
		return err
	}
}

func (r *router) refuse(ctx context.Context, rec *kgo.Record, reason string, err error) {
	opt := refusedPermanent
	if reason == metadata.ReasonUndecodable {
		opt = refusedUndecodable
	}
	r.tb.GpuFaultsRecordsRefused.Add(ctx, 1, opt)
	r.logger.Error("gpu_faults record refused; committing it and moving past it",
		zap.String("topic", rec.Topic), zap.Int32("partition", rec.Partition),
		zap.Int64("offset", rec.Offset), zap.String("reason", reason), zap.Error(err))
}

// withRecordInfo puts where rec came from into ctx's client.Info metadata
// (internal/semconv names the keys), keeping what ctx already carried.
func withRecordInfo(ctx context.Context, rec *kgo.Record) context.Context {
	info := client.FromContext(ctx)
	md := map[string][]string{
		semconv.MetadataKafkaTopic:     {rec.Topic},
		semconv.MetadataKafkaPartition: {strconv.FormatInt(int64(rec.Partition), 10)},
		semconv.MetadataKafkaOffset:    {strconv.FormatInt(rec.Offset, 10)},
	}
	for k := range info.Metadata.Keys() {
		if _, ok := md[k]; !ok {
			md[k] = info.Metadata.Get(k)
		}
	}
	info.Metadata = client.NewMetadata(md)
	return client.NewContext(ctx, info)
}
