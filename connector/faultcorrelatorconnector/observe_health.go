package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// healthIncidentSelectors are the attributes of a DCGM health incident
// record a rule may select the incident signal by ("name{k=v}", as a
// metric point's attributes).
var healthIncidentSelectors = [...]string{
	semconv.AttrGPUHealthErrorName,
	semconv.AttrGPUHealthSystem,
	semconv.AttrGPUHealthResult,
}

// healthIncident reports whether a is the record of a DCGM health incident
// that appeared (result warn or fail), not of one that cleared.
func healthIncident(a pcommon.Map) bool {
	v, ok := a.Get(semconv.AttrGPUHealthResult)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return false
	}
	return v.Str() == semconv.HealthResultWarn || v.Str() == semconv.HealthResultFail
}

// observeHealthIncident observes an appearing incident as the text signal
// semconv.EventGPUHealthIncident, under the bare name and under
// name{k=v} for its error name, system and result, so that a rule can
// pick the incidents it is about (DCGM_FR_VOLATILE_DBE_DETECTED, say) and
// quote them: the text is what the fault's evidence carries, e.g.
// "memory fail DCGM_FR_VOLATILE_DBE_DETECTED (4): Detected 2 volatile
// double-bit ECC error(s) in GPU 1.".
func (c *correlator) observeHealthIncident(ents []fault.Entity, w where, a pcommon.Map, base rules.Sample) {
	str := func(k string) string {
		if v, ok := a.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	var b strings.Builder
	b.WriteString(str(semconv.AttrGPUHealthSystem))
	b.WriteByte(' ')
	b.WriteString(str(semconv.AttrGPUHealthResult))
	b.WriteByte(' ')
	b.WriteString(str(semconv.AttrGPUHealthErrorName))
	if v, ok := a.Get(semconv.AttrGPUHealthErrorCode); ok && v.Type() == pcommon.ValueTypeInt {
		b.WriteString(" (" + strconv.FormatInt(v.Int(), 10) + ")")
	}
	if v, ok := a.Get(semconv.AttrGPUHealthNVSwitch); ok {
		b.WriteString(" on NVSwitch " + v.AsString())
	}
	if msg := str(semconv.AttrGPUHealthErrorMessage); msg != "" {
		b.WriteString(": " + msg)
	}
	s := base
	s.Text = b.String()
	s.Signal = semconv.EventGPUHealthIncident
	c.observeUnder(ents, w, s)
	for _, k := range healthIncidentSelectors {
		if v := str(k); v != "" {
			s.Signal = semconv.EventGPUHealthIncident + "{" + k + "=" + v + "}"
			c.observeUnder(ents, w, s)
		}
	}
}
