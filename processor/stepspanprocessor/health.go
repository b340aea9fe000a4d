package stepspanprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// putHealth summarises the rank's GPU and the node's InfiniBand ports over
// the health window ending with the step: the latest gauges (SM active,
// temperature, throttle reasons) and the growth of the error counters.
// DCGM and sysfs are read every 10-30 s while a step lasts 1-10 s, so the
// counters are compared over health_window (default 60 s), not the step
// alone, which would almost always fall between two readings.
func putHealth(store nodestate.Store, window time.Duration, res, attrs pcommon.Map, start, end time.Time) {
	from := end.Add(-window)
	if window == 0 {
		from = start // the step's own interval
	}
	out := steprecord.Health{Window: end.Sub(from)}
	if uuid := strAttr(attrs, res, semconv.AttrGPUUUID); uuid != "" {
		if h, ok := store.GPUHealth(uuid, from, end); ok {
			out.GPU = true
			out.SMActive, out.HasSMActive = h.SMActive.Value, h.SMActive.Valid
			out.Temperature, out.HasTemperature = h.TemperatureC.Value, h.TemperatureC.Valid
			out.Throttle, out.HasThrottle = h.ThrottleReasons.Reasons, h.ThrottleReasons.Valid
			out.NVLinkCRC = int64(h.NVLinkCRCErrors())
			out.ECCSBE = int64(h.Counters[nodestate.ECCSBEVolatile].Delta)
			out.ECCDBE = int64(h.Counters[nodestate.ECCDBEVolatile].Delta)
			for _, x := range h.XIDs {
				out.XIDs = append(out.XIDs, int64(x.Code))
			}
		}
	}
	if ib, ok := store.NodeIBHealth(from, end); ok {
		out.IB = true
		out.IBSymbol = int64(ib.Totals[nodestate.IBSymbolErrors])
		out.IBLinkDown = int64(ib.Totals[nodestate.IBLinkDowned])
	}
	steprecord.PutHealth(attrs, out)
}
