package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

// DCGM health watches (sources that implement source.Health: dcgm): checked
// after each collection of the device fields; each incident is a log record
// when it appears and when it clears, and every GPU and watched system a
// gauge point at every check.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// healthStatusDescription is the health gauge's description (metadata.yaml).
const healthStatusDescription = "Worst result of DCGM's health watch on the system in gpu.dcgm.health.system: 0 pass, 1 warn, 2 fail."

// healthState is what the receiver reported of the health watches: the
// incidents whose appearance the logs pipeline accepted and that have not
// cleared since. The collection loop owns it.
type healthState struct {
	active  map[model.HealthKey]model.HealthIncident
	failing bool // the last check failed (logged once per change)
}

// healthKeyGPU names the GPU of an incident in its key.
func healthKeyGPU(in model.HealthIncident) string {
	if in.OnNVSwitch {
		return ""
	}
	if in.GPU.UUID != "" {
		return gpuKey(in.GPU)
	}
	return "index:" + strconv.Itoa(in.GPU.Index)
}

// checkHealth checks the source's health watches, when it has them, and
// reports what changed as log records and every GPU's state as metrics. A
// failed check changes nothing: an incident is not cleared because DCGM
// could not be asked.
func (r *dcgmReceiver) checkHealth(ctx context.Context) {
	hs, ok := r.deps.metricsSource.(source.Health)
	gauge := r.nextMetrics != nil && r.cfg.Naming != NamingDCGMExporter
	if !ok || r.nextLogs == nil && !gauge {
		return // nothing would carry what the check says
	}
	rep, err := hs.CheckHealth(ctx)
	switch {
	case err != nil && !r.health.failing:
		r.logger.Warn("dcgmreceiver: DCGM health check failing; the last reported incidents stand until a check succeeds", zap.Error(err))
		r.health.failing = true
	case err == nil && r.health.failing:
		r.logger.Info("dcgmreceiver: DCGM health checks succeed again")
		r.health.failing = false
	}
	if err != nil {
		return
	}
	if rep.Time.IsZero() {
		rep.Time = r.deps.now()
	}
	r.noteHealth(ctx, rep)
	if gauge && (len(rep.GPUs) > 0 || len(rep.NVSwitches) > 0) {
		md := r.metrics.buildHealth(rep, func(g model.GPU) model.Owner { return r.owner(model.GPUSample{GPU: g}) })
		if err := r.nextMetrics.ConsumeMetrics(ctx, md); err != nil {
			r.logger.Debug("dcgmreceiver: DCGM health metrics refused by the metrics pipeline", zap.Error(err))
		}
	}
}

// noteHealth logs each incident once when it appears and once when it
// clears. A record the logs pipeline refuses is offered again at the next
// check (the change is not taken as reported).
func (r *dcgmReceiver) noteHealth(ctx context.Context, rep model.HealthReport) {
	if r.health.active == nil {
		r.health.active = map[model.HealthKey]model.HealthIncident{}
	}
	now := map[model.HealthKey]model.HealthIncident{}
	for _, in := range rep.Incidents {
		k := in.Key(healthKeyGPU(in))
		if prev, dup := now[k]; dup && prev.Result >= in.Result {
			continue
		}
		now[k] = in
	}
	emit := func(in model.HealthIncident, cleared bool) bool {
		if r.nextLogs == nil {
			return true
		}
		var o model.Owner
		if !in.OnNVSwitch {
			o = r.owner(model.GPUSample{GPU: in.GPU})
		}
		if err := r.nextLogs.ConsumeLogs(ctx, r.logs.healthLogs(in, o, cleared, rep.Time)); err != nil {
			r.logger.Warn("dcgmreceiver: DCGM health record refused by the logs pipeline; reported again at the next check",
				zap.String("code", in.CodeName), zap.Error(err))
			return false
		}
		return true
	}
	for k, in := range now {
		if prev, ok := r.health.active[k]; ok && prev.Result == in.Result {
			continue
		}
		if emit(in, false) {
			r.health.active[k] = in
		}
	}
	for k, in := range r.health.active {
		if _, still := now[k]; still || rep.Baseline {
			continue
		}
		if emit(in, true) {
			delete(r.health.active, k)
		}
	}
}

// healthLogs returns the record of an incident that appeared (or, cleared
// set, that cleared) on its GPU's resource, or the node's for an NVSwitch.
func (b *logsBuilder) healthLogs(in model.HealthIncident, o model.Owner, cleared bool, at time.Time) plog.Logs {
	gpu := in.GPU
	if in.OnNVSwitch {
		gpu = model.GPU{}
	}
	ld, lr := b.newRecord(gpu, o)
	ts := pcommon.NewTimestampFromTime(at)
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	lr.SetEventName(semconv.EventGPUHealthIncident)
	where := fmt.Sprintf("GPU %d %s", gpu.Index, gpuLabel(gpu))
	if in.OnNVSwitch {
		where = "NVSwitch " + strconv.FormatUint(uint64(in.NVSwitch), 10)
	}
	result := in.Result.String()
	switch {
	case cleared:
		result = model.HealthPass.String()
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("info")
		lr.Body().SetStr(fmt.Sprintf("DCGM health: %s %s on %s cleared (was %s: %s)", in.System, in.CodeName, where, in.Result, in.Message))
	default:
		if in.Result == model.HealthFail {
			lr.SetSeverityNumber(plog.SeverityNumberError)
			lr.SetSeverityText("error")
		} else {
			lr.SetSeverityNumber(plog.SeverityNumberWarn)
			lr.SetSeverityText("warn")
		}
		lr.Body().SetStr(fmt.Sprintf("DCGM health: %s %s on %s: %s (%d): %s", in.System, in.Result, where, in.CodeName, in.Code, in.Message))
	}
	a := lr.Attributes()
	a.PutStr(semconv.AttrEventName, semconv.EventGPUHealthIncident)
	a.PutStr(semconv.AttrGPUHealthSystem, in.System)
	a.PutStr(semconv.AttrGPUHealthResult, result)
	a.PutInt(semconv.AttrGPUHealthErrorCode, int64(in.Code))
	a.PutStr(semconv.AttrGPUHealthErrorName, in.CodeName)
	putNonEmpty(a, semconv.AttrGPUHealthErrorMessage, in.Message)
	if in.OnNVSwitch {
		a.PutInt(semconv.AttrGPUHealthNVSwitch, int64(in.NVSwitch))
	}
	return ld
}

// buildHealth returns the health gauge: for every GPU and system watched,
// the worst result reported (0 pass, 1 warn, 2 fail); for each NVSwitch,
// the same on the node's resource.
func (b *metricsBuilder) buildHealth(rep model.HealthReport, owner func(model.GPU) model.Owner) pmetric.Metrics {
	ts := pcommon.NewTimestampFromTime(rep.Time)
	type where struct {
		gpu      string
		nvSwitch uint
		onSwitch bool
	}
	worst := map[where]map[string]model.HealthResult{}
	for _, in := range rep.Incidents {
		w := where{gpu: healthKeyGPU(in), nvSwitch: in.NVSwitch, onSwitch: in.OnNVSwitch}
		if worst[w] == nil {
			worst[w] = map[string]model.HealthResult{}
		}
		worst[w][in.System] = max(worst[w][in.System], in.Result)
	}
	md := pmetric.NewMetrics()
	gauge := func(rm pmetric.ResourceMetrics) pmetric.NumberDataPointSlice {
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(metadata.ScopeName)
		sm.Scope().SetVersion(b.version)
		m := sm.Metrics().AppendEmpty()
		m.SetName(semconv.MetricGPUHealthStatus)
		m.SetDescription(healthStatusDescription)
		return m.SetEmptyGauge().DataPoints()
	}
	point := func(dps pmetric.NumberDataPointSlice, system string, r model.HealthResult) pmetric.NumberDataPoint {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.Attributes().PutStr(semconv.AttrGPUHealthSystem, system)
		dp.SetIntValue(int64(r))
		return dp
	}
	for _, g := range rep.GPUs {
		rm := md.ResourceMetrics().AppendEmpty()
		b.putOTelResource(rm.Resource().Attributes(), g, owner(g))
		dps := gauge(rm)
		w := worst[where{gpu: healthKeyGPU(model.HealthIncident{GPU: g})}]
		for _, sys := range rep.GPUSystems {
			point(dps, sys, w[sys])
		}
	}
	if len(rep.NVSwitches) > 0 && len(rep.NVSwitchSystems) > 0 {
		rm := md.ResourceMetrics().AppendEmpty()
		putNonEmpty(rm.Resource().Attributes(), semconv.AttrHostName, b.hostName)
		dps := gauge(rm)
		for _, sw := range rep.NVSwitches {
			w := worst[where{nvSwitch: sw, onSwitch: true}]
			for _, sys := range rep.NVSwitchSystems {
				point(dps, sys, w[sys]).Attributes().PutInt(semconv.AttrGPUHealthNVSwitch, int64(sw))
			}
		}
	}
	return md
}
