package steprecord

import (
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Resource is what a rank's training process sets on the resource of
// everything it sends (docs/training-scripts.md, "Resource attributes").
type Resource struct {
	Service string // service.name
	Host    string
	Job     string
	// Attempt is written when HasAttempt; readers take an absent one as 0.
	Attempt    int64
	HasAttempt bool
	Rank       int64
	LocalRank  int64
	WorldSize  int64
	GPU        string // gpu.uuid; "" leaves it out
	// Stage is training.pp_stage, written when HasStage.
	Stage    int64
	HasStage bool
}

// PutResource writes r into m.
func PutResource(m pcommon.Map, r Resource) {
	m.PutStr(semconv.AttrServiceName, r.Service)
	m.PutStr(semconv.AttrHostName, r.Host)
	m.PutStr(semconv.AttrTrainingJobID, r.Job)
	if r.HasAttempt {
		m.PutInt(semconv.AttrTrainingAttempt, r.Attempt)
	}
	m.PutInt(semconv.AttrTrainingRank, r.Rank)
	m.PutInt(semconv.AttrTrainingLocalRank, r.LocalRank)
	m.PutInt(semconv.AttrTrainingWorldSize, r.WorldSize)
	if r.GPU != "" {
		m.PutStr(semconv.AttrGPUUUID, r.GPU)
	}
	if r.HasStage {
		m.PutInt(semconv.AttrTrainingPPStage, r.Stage)
	}
}

// PutStep writes which step of which job run m is about: the step's root
// span names no rank.
func PutStep(m pcommon.Map, job string, attempt, step int64) {
	m.PutStr(semconv.AttrTrainingJobID, job)
	m.PutInt(semconv.AttrTrainingAttempt, attempt)
	m.PutInt(semconv.AttrIterationStep, step)
}

// PutIdentity writes the identity: PutStep and the rank.
func PutIdentity(m pcommon.Map, id Identity) {
	PutStep(m, id.Job, id.Attempt, id.Step)
	m.PutInt(semconv.AttrTrainingRank, id.Rank)
}

// PutStage writes a stage read with Stage back as the script sent it: an
// int when it is a number (the usual case), else the string.
func PutStage(m pcommon.Map, stage string) {
	if n, err := strconv.ParseInt(stage, 10, 64); err == nil {
		m.PutInt(semconv.AttrTrainingPPStage, n)
	} else {
		m.PutStr(semconv.AttrTrainingPPStage, stage)
	}
}

// PhaseKey is training.phase.<name>_ns; the contract's four phases without
// building the string.
func PhaseKey(name string) string {
	switch name {
	case "dataload":
		return semconv.AttrPhaseDataloadNs
	case "forward":
		return semconv.AttrPhaseForwardNs
	case "backward":
		return semconv.AttrPhaseBackwardNs
	case "optimizer":
		return semconv.AttrPhaseOptimizerNs
	}
	return semconv.AttrTrainingPhasePrefix + name + semconv.AttrTrainingPhaseSuffix
}

// PutPhase writes a phase's duration in ns.
func PutPhase(m pcommon.Map, name string, d time.Duration) {
	m.PutInt(PhaseKey(name), int64(d))
}

// Collectives summarises a rank's NCCL collectives within a step.
type Collectives struct {
	Count   int64
	Total   time.Duration
	Longest time.Duration
	// LongestName is the longest collective's name.
	LongestName string
	// Offsets are the collectives' enqueue times from the step's start.
	Offsets   []int64
	Anomalies int64 // slow or failed collectives sent under the step
}

// PutCollectives writes the summary: the count and the anomalies always,
// the times and the longest only when there was a collective.
func PutCollectives(m pcommon.Map, c Collectives) {
	m.PutInt(semconv.AttrCollectivesCount, c.Count)
	if c.Count > 0 {
		m.PutInt(semconv.AttrCollectivesTotalNs, int64(c.Total))
		m.PutInt(semconv.AttrCollectivesMaxNs, int64(c.Longest))
		m.PutStr(semconv.AttrCollectivesMaxName, c.LongestName)
		s := m.PutEmptySlice(semconv.AttrCollectivesOffsetsNs)
		s.EnsureCapacity(len(c.Offsets))
		for _, o := range c.Offsets {
			s.AppendEmpty().SetInt(o)
		}
	}
	m.PutInt(semconv.AttrCollectivesAnomalies, c.Anomalies)
}

// Health is the rank's GPU and its node's InfiniBand ports over the health
// window ending with the step.
type Health struct {
	// GPU: the GPU's health was known; the GPU fields below are written.
	GPU                         bool
	SMActive, Temperature       float64
	HasSMActive, HasTemperature bool
	// Throttle reasons, written when HasThrottle (an empty list says none).
	Throttle             []string
	HasThrottle          bool
	NVLinkCRC, ECCSBE    int64
	ECCDBE               int64
	XIDs                 []int64 // written when not empty
	IB                   bool    // the ports' health was known
	IBSymbol, IBLinkDown int64
	Window               time.Duration // written when GPU or IB
}

// PutHealth writes what h knows.
func PutHealth(m pcommon.Map, h Health) {
	if h.GPU {
		if h.HasSMActive {
			m.PutDouble(semconv.AttrHealthSMActive, h.SMActive)
		}
		if h.HasTemperature {
			m.PutDouble(semconv.AttrHealthTemperature, h.Temperature)
		}
		if h.HasThrottle {
			s := m.PutEmptySlice(semconv.AttrHealthThrottle)
			for _, r := range h.Throttle {
				s.AppendEmpty().SetStr(r)
			}
		}
		m.PutInt(semconv.AttrHealthNVLinkCRC, h.NVLinkCRC)
		m.PutInt(semconv.AttrHealthECCSBE, h.ECCSBE)
		m.PutInt(semconv.AttrHealthECCDBE, h.ECCDBE)
		if len(h.XIDs) > 0 {
			s := m.PutEmptySlice(semconv.AttrHealthXIDs)
			for _, x := range h.XIDs {
				s.AppendEmpty().SetInt(x)
			}
		}
	}
	if h.IB {
		m.PutInt(semconv.AttrHealthIBSymbol, h.IBSymbol)
		m.PutInt(semconv.AttrHealthIBLinkDowned, h.IBLinkDown)
	}
	if h.GPU || h.IB {
		m.PutDouble(semconv.AttrHealthWindowS, h.Window.Seconds())
	}
}
