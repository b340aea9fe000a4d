package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// where is what one input says about the entities it belongs to.
type where struct {
	host, gpu, job, ibDevice, ibPort string
	rank                             int64
	rankKnown                        bool
}

// read fills w from attrs; later maps (a record's own attributes) override
// earlier ones (its resource's). One pass over attrs: a rank span carries
// some twenty attributes, and a lookup per field walked them six times.
// Within one map a key's first entry is its value, as pcommon.Map.Get,
// internal/steprecord and the agent's provenance processor read it: a map
// naming a key twice (refused at an agent's OTLP edge, internal/otlpmap)
// cannot show this reader another host than the one provenance judged.
func (w *where) read(attrs pcommon.Map) {
	str := func(v pcommon.Value, dst *string) {
		if s := v.AsString(); s != "" {
			*dst = s
		}
	}
	var seen readFields
	for k, v := range attrs.All() {
		switch k {
		case semconv.AttrHostName:
			if seen.first(readHost) {
				str(v, &w.host)
			}
		case semconv.AttrGPUUUID:
			if seen.first(readGPU) {
				str(v, &w.gpu)
			}
		case semconv.AttrTrainingJobID:
			// The contract's job id is a non-empty string (internal/steprecord).
			if seen.first(readJob) && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
				w.job = v.Str()
			}
		case semconv.AttrIBDevice:
			if seen.first(readIBDevice) {
				str(v, &w.ibDevice)
			}
		case semconv.AttrIBPort:
			if seen.first(readIBPort) {
				str(v, &w.ibPort)
			}
		case semconv.AttrTrainingRank:
			// The contract's rank, read as every step-record reader reads
			// it (steprecord.Int): an int or an integral double, and a
			// negative one is no rank. A value of another type (a string,
			// a fraction) leaves the resource's rank in place.
			if !seen.first(readRank) {
				break
			}
			if n, ok := steprecord.Int(v); ok {
				w.rank, w.rankKnown = n, n >= 0
			}
		}
	}
}

// readFields are the keys where.read has met in one map.
type readFields uint8

const (
	readHost readFields = 1 << iota
	readGPU
	readJob
	readIBDevice
	readIBPort
	readRank
)

// first reports whether f is met for the first time, and notes it.
func (s *readFields) first(f readFields) bool {
	if *s&f != 0 {
		return false
	}
	*s |= f
	return true
}

// maxEntitiesPerInput bounds entities: GPU, IB port, rank, node and job.
const maxEntitiesPerInput = 5

// entities lists every entity the input belongs to, finest first: a signal
// is observed under each, so rules on any kind see it.
func (w where) entities() []fault.Entity {
	return w.entitiesInto(nil, "")
}

// rankKey is the key of the rank entity of job's rank.
func rankKey(job string, rank int64) string {
	return job + "/" + strconv.FormatInt(rank, 10)
}

// entitiesInto is entities appended to out, so that a caller can pass an
// array's slice and spare the allocation; rk, when not empty, is the rank
// key the caller already built.
func (w where) entitiesInto(out []fault.Entity, rk string) []fault.Entity {
	if w.gpu != "" {
		out = append(out, fault.Entity{Kind: fault.EntityGPU, Key: w.gpu})
	}
	if w.host != "" && w.ibDevice != "" && w.ibPort != "" {
		out = append(out, fault.Entity{Kind: fault.EntityIBPort, Key: w.host + "/" + w.ibDevice + "/" + w.ibPort})
	}
	if w.job != "" && w.rankKnown {
		if rk == "" {
			rk = rankKey(w.job, w.rank)
		}
		out = append(out, fault.Entity{Kind: fault.EntityRank, Key: rk})
	}
	if w.host != "" {
		out = append(out, fault.Entity{Kind: fault.EntityNode, Key: w.host})
	}
	if w.job != "" {
		out = append(out, fault.Entity{Kind: fault.EntityJob, Key: w.job})
	}
	return out
}
