package stepspanprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Health attributes on a rank's step span (docs/training-scripts.md).
const (
	attrHealthSMActive    = "gpu.health.sm_active"
	attrHealthTemperature = "gpu.health.temperature"
	attrHealthThrottle    = "gpu.health.throttle_reasons"
	attrHealthNVLinkCRC   = "gpu.health.nvlink_crc_errors"
	attrHealthECCSBE      = "gpu.health.ecc_sbe_errors"
	attrHealthECCDBE      = "gpu.health.ecc_dbe_errors"
	attrHealthXIDs        = "gpu.health.xids"
	attrHealthIBSymbol    = "ib.health.symbol_errors"
	attrHealthIBLinkDown  = "ib.health.link_downed"
	attrHealthWindowS     = "gpu.health.window_s"
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
	uuid := strAttr(attrs, res, semconv.AttrGPUUUID)
	found := false
	if uuid != "" {
		if h, ok := store.GPUHealth(uuid, from, end); ok {
			found = true
			if h.SMActive.Valid {
				attrs.PutDouble(attrHealthSMActive, h.SMActive.Value)
			}
			if h.TemperatureC.Valid {
				attrs.PutDouble(attrHealthTemperature, h.TemperatureC.Value)
			}
			if h.ThrottleReasons.Valid {
				s := attrs.PutEmptySlice(attrHealthThrottle)
				for _, r := range h.ThrottleReasons.Reasons {
					s.AppendEmpty().SetStr(r)
				}
			}
			attrs.PutInt(attrHealthNVLinkCRC, int64(h.NVLinkCRCErrors()))
			attrs.PutInt(attrHealthECCSBE, int64(h.Counters[nodestate.ECCSBEVolatile].Delta))
			attrs.PutInt(attrHealthECCDBE, int64(h.Counters[nodestate.ECCDBEVolatile].Delta))
			if len(h.XIDs) > 0 {
				s := attrs.PutEmptySlice(attrHealthXIDs)
				for _, x := range h.XIDs {
					s.AppendEmpty().SetInt(int64(x.Code))
				}
			}
		}
	}
	if ib, ok := store.NodeIBHealth(from, end); ok {
		found = true
		attrs.PutInt(attrHealthIBSymbol, int64(ib.Totals[nodestate.IBSymbolErrors]))
		attrs.PutInt(attrHealthIBLinkDown, int64(ib.Totals[nodestate.IBLinkDowned]))
	}
	if found {
		attrs.PutDouble(attrHealthWindowS, end.Sub(from).Seconds())
	}
}
