package nodestateprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"

import (
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// recordLogs records every gpu.xid log record of ld: the GPU from the
// resource's gpu.uuid (or the record's own), the code from gpu.xid, the
// time from the record (its observed time when it has none).
func recordLogs(store nodestate.Store, ld plog.Logs) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		resUUID := stringAttr(rl.Resource().Attributes(), semconv.AttrGPUUUID)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				recordXID(store, resUUID, lrs.At(k))
			}
		}
	}
}

func recordXID(store nodestate.Store, resUUID string, lr plog.LogRecord) {
	attrs := lr.Attributes()
	if lr.EventName() != semconv.EventGPUXID && stringAttr(attrs, semconv.AttrEventName) != semconv.EventGPUXID {
		return
	}
	code, ok := xidCode(attrs)
	if !ok {
		return
	}
	uuid := resUUID
	if uuid == "" {
		uuid = stringAttr(attrs, semconv.AttrGPUUUID)
	}
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	if uuid == "" || ts == 0 {
		return
	}
	store.RecordXID(uuid, ts.AsTime(), code)
}
