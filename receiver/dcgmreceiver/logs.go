package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/xid"
)

// newXIDCatalogue builds the XID table from the built-in one and the
// configured overrides.
func newXIDCatalogue(entries []XIDEntryConfig) (*xid.Catalogue, error) {
	overrides := make([]xid.Entry, 0, len(entries))
	for i, e := range entries {
		sev, err := xid.ParseSeverity(e.Severity)
		if err != nil {
			return nil, fmt.Errorf("[%d] (code %d): severity: %w", i, e.Code, err)
		}
		overrides = append(overrides, xid.Entry{Code: e.Code, Name: e.Name, Severity: sev, Action: e.Action})
	}
	return xid.New(overrides)
}

// logsBuilder turns XID events and GPU state changes into log records: one
// record per occurrence, never sampled or merged, so that the correlator and
// a human see every one.
type logsBuilder struct {
	hostName string
	version  string
	xids     *xid.Catalogue
}

// xidLogs returns the log record of one XID occurrence on gpu (resolved from
// what the source knew) owned by o.
func (b *logsBuilder) xidLogs(ev model.XIDEvent, gpu model.GPU, o model.Owner, observed time.Time) plog.Logs {
	entry := b.xids.Lookup(ev.Code)
	ld, lr := b.newRecord(gpu, o)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(ev.Time))
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(observed))
	lr.SetSeverityNumber(entry.Severity.OTel())
	lr.SetSeverityText(entry.Severity.String())
	lr.SetEventName(semconv.EventGPUXID)
	body := fmt.Sprintf("XID %d (%s) on GPU %d %s", ev.Code, entry.Name, gpu.Index, gpuLabel(gpu))
	if ev.Message != "" {
		body += ": " + ev.Message
	}
	lr.Body().SetStr(body)
	a := lr.Attributes()
	a.PutStr(semconv.AttrEventName, semconv.EventGPUXID)
	a.PutInt(semconv.AttrGPUXID, int64(ev.Code))
	a.PutStr(semconv.AttrGPUXIDName, entry.Name)
	a.PutStr(semconv.AttrGPUXIDAction, entry.Action)
	a.PutStr(semconv.AttrGPUXIDSource, ev.Source)
	if ev.PID > 0 {
		a.PutInt(semconv.AttrProcessPID, int64(ev.PID))
	}
	putNonEmpty(a, semconv.AttrProcessName, ev.ProcessName)
	return ld
}

// unresponsiveLogs reports a GPU whose driver calls stopped (or resumed)
// returning: the correlator treats a hang like an XID 79.
func (b *logsBuilder) unresponsiveLogs(gpu model.GPU, o model.Owner, hung bool, at time.Time) plog.Logs {
	ld, lr := b.newRecord(gpu, o)
	ts := pcommon.NewTimestampFromTime(at)
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	lr.SetEventName(semconv.EventGPUHang)
	lr.Attributes().PutStr(semconv.AttrEventName, semconv.EventGPUHang)
	// The metric's name as a bool: the correlator reads it as that signal.
	lr.Attributes().PutBool(semconv.MetricGPUUnresponsive, hung)
	if hung {
		lr.SetSeverityNumber(plog.SeverityNumberError)
		lr.SetSeverityText("error")
		lr.Body().SetStr(fmt.Sprintf("GPU %d %s does not answer driver calls", gpu.Index, gpuLabel(gpu)))
	} else {
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("info")
		lr.Body().SetStr(fmt.Sprintf("GPU %d %s answers driver calls again", gpu.Index, gpuLabel(gpu)))
	}
	return ld
}

// newRecord returns logs holding one empty record on the GPU's resource.
func (b *logsBuilder) newRecord(gpu model.GPU, o model.Owner) (plog.Logs, plog.LogRecord) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	b.putGPUResource(rl.Resource().Attributes(), gpu, o)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	sl.Scope().SetVersion(b.version)
	return ld, sl.LogRecords().AppendEmpty()
}

func (b *logsBuilder) putGPUResource(res pcommon.Map, g model.GPU, o model.Owner) {
	putNonEmpty(res, semconv.AttrHostName, b.hostName)
	putNonEmpty(res, semconv.AttrGPUUUID, g.UUID)
	if g.UUID != "" || g.Device != "" {
		res.PutInt(semconv.AttrGPUIndex, int64(g.Index))
	}
	putNonEmpty(res, semconv.AttrGPUModel, g.Model)
	putNonEmpty(res, semconv.AttrGPUPCIBusID, g.PCIBusID)
	putNonEmpty(res, semconv.AttrGPUDriverVersion, g.DriverVersion)
	putOwner(res, o, semconv.AttrK8sPodName, semconv.AttrK8sNamespaceName, semconv.AttrK8sContainerName)
	putNonEmpty(res, semconv.AttrSlurmJobID, o.SlurmJobID)
	putNonEmpty(res, semconv.AttrTrainingJobID, o.TrainingJobID)
}

func gpuLabel(g model.GPU) string {
	s := "(" + g.PCIBusID
	if g.UUID != "" {
		if g.PCIBusID != "" {
			s += ", "
		}
		s += g.UUID
	}
	if g.MIG != nil {
		s += ", MIG " + strconv.Itoa(g.MIG.GPUInstanceID) + "/" + strconv.Itoa(g.MIG.ComputeInstanceID)
	}
	return s + ")"
}
