package dcgmreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// Issue 31: dcgm-exporter labels DCGM_FI_DEV_XID_ERRORS with the last
// XID's code and its text (err_code="79", err_msg="GPU has fallen off the
// bus"); an alert on either must keep working on the agent's page. Under
// otel naming the value alone is reported (the XID log record carries
// the name).
func TestLastXIDCarriesDCGMExportersLabels(t *testing.T) {
	for naming, want := range map[string]map[string]any{
		NamingDCGMExporter: {"err_code": "79", "err_msg": "GPU has fallen off the bus"},
		NamingOTel:         {},
	} {
		t.Run(naming, func(t *testing.T) {
			for _, v := range []model.Value{intValue(model.FieldXIDErrors, 79), floatValue(model.FieldXIDErrors, 79)} {
				b := newMetricsBuilder(naming, "xl003", "test", 1)
				md := b.build(snapshot(time.Unix(1_790_000_000, 0), v), noOwner, nil)
				dp, ok := lastXIDPoint(md, model.FieldXIDErrors, naming)
				require.True(t, ok, "the last XID is reported")
				assert.Equal(t, want, dp.Attributes().AsRaw())
			}
		})
	}
	b := newMetricsBuilder(NamingDCGMExporter, "xl003", "test", 1)
	for code, msg := range map[int64]string{0: "No Error", 200: "Unknown Error"} {
		dp, ok := lastXIDPoint(b.build(snapshot(time.Unix(1_790_000_000, 0), intValue(model.FieldXIDErrors, code)), noOwner, nil), model.FieldXIDErrors, NamingDCGMExporter)
		require.True(t, ok)
		assert.Equal(t, msg, dp.Attributes().AsRaw()["err_msg"], "code %d", code)
	}
}

// lastXIDPoint returns the data point of the last XID under naming.
func lastXIDPoint(md pmetric.Metrics, id model.FieldID, naming string) (pmetric.NumberDataPoint, bool) {
	f, _ := model.FieldByID(id)
	if naming == NamingOTel {
		return findPoint(md, f.OTel, nil)
	}
	return findPoint(md, f.Name, nil)
}

func noOwner(model.GPUSample) model.Owner { return model.Owner{} }
