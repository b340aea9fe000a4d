package steprecord

import "github.com/otelcol-gpu/otelcol-gpu/internal/semconv"

// Field is what an attribute is in the step record.
type Field uint8

// The record's fields. Identity and placement first (read from the span or
// its resource), then what the step measured (read from the span only).
const (
	FieldNone Field = iota
	FieldJob
	FieldHost
	FieldGPU
	FieldStage
	FieldAttempt
	FieldStep
	FieldRank
	FieldWorldSize
	FieldLocalRank

	FieldPhaseDataload
	FieldPhaseForward
	FieldPhaseBackward
	FieldPhaseOptimizer
	FieldCollectivesTotalNs
	// FieldPhaseCommWait (training.phase.comm_wait_ns) is the exposed
	// communication wait a script measured; its presence says the phases
	// are compute-only. FieldCollectivesTailNs (nccl.collectives.tail_ns)
	// is the same wait as stepspan derives it from the flight recorder.
	FieldPhaseCommWait
	FieldCollectivesTailNs
	// The fields above are the ones Attrs keeps; those below it classifies
	// only (lastKept).

	FieldTokens
	FieldLoss
	FieldFlops

	FieldCollectivesCount
	FieldCollectivesMaxNs
	FieldCollectivesMaxName
	FieldCollectivesOffsetsNs
	FieldCollectivesAnomalies

	FieldHealthSMActive
	FieldHealthTemperature
	FieldHealthThrottle
	FieldHealthNVLinkCRC
	FieldHealthECCSBE
	FieldHealthECCDBE
	FieldHealthXIDs
	FieldHealthWindowS
	FieldHealthIBSymbol
	FieldHealthIBLinkDowned

	numFields

	// lastKept is the last field Attrs keeps a value of: who the rank is,
	// and what the straggler decision reads.
	lastKept = FieldCollectivesTailNs
)

// fieldKeys are the attribute keys of the fields.
var fieldKeys = [numFields]string{
	FieldJob:       semconv.AttrTrainingJobID,
	FieldAttempt:   semconv.AttrTrainingAttempt,
	FieldStep:      semconv.AttrIterationStep,
	FieldRank:      semconv.AttrTrainingRank,
	FieldWorldSize: semconv.AttrTrainingWorldSize,
	FieldLocalRank: semconv.AttrTrainingLocalRank,
	FieldStage:     semconv.AttrTrainingPPStage,
	FieldHost:      semconv.AttrHostName,
	FieldGPU:       semconv.AttrGPUUUID,

	FieldPhaseDataload:  semconv.AttrPhaseDataloadNs,
	FieldPhaseForward:   semconv.AttrPhaseForwardNs,
	FieldPhaseBackward:  semconv.AttrPhaseBackwardNs,
	FieldPhaseOptimizer: semconv.AttrPhaseOptimizerNs,
	FieldPhaseCommWait:  semconv.AttrPhaseCommWaitNs,
	FieldTokens:         semconv.AttrTrainingTokens,
	FieldLoss:           semconv.AttrTrainingLoss,
	FieldFlops:          semconv.AttrTrainingFlops,

	FieldCollectivesCount:     semconv.AttrCollectivesCount,
	FieldCollectivesTotalNs:   semconv.AttrCollectivesTotalNs,
	FieldCollectivesTailNs:    semconv.AttrCollectivesTailNs,
	FieldCollectivesMaxNs:     semconv.AttrCollectivesMaxNs,
	FieldCollectivesMaxName:   semconv.AttrCollectivesMaxName,
	FieldCollectivesOffsetsNs: semconv.AttrCollectivesOffsetsNs,
	FieldCollectivesAnomalies: semconv.AttrCollectivesAnomalies,

	FieldHealthSMActive:     semconv.AttrHealthSMActive,
	FieldHealthTemperature:  semconv.AttrHealthTemperature,
	FieldHealthThrottle:     semconv.AttrHealthThrottle,
	FieldHealthNVLinkCRC:    semconv.AttrHealthNVLinkCRC,
	FieldHealthECCSBE:       semconv.AttrHealthECCSBE,
	FieldHealthECCDBE:       semconv.AttrHealthECCDBE,
	FieldHealthXIDs:         semconv.AttrHealthXIDs,
	FieldHealthWindowS:      semconv.AttrHealthWindowS,
	FieldHealthIBSymbol:     semconv.AttrHealthIBSymbol,
	FieldHealthIBLinkDowned: semconv.AttrHealthIBLinkDowned,
}

// FieldOf classifies an attribute key; FieldNone when it is not the
// record's. It runs for every attribute of every step span on the gateway:
// one table load by the key's length, a scan of the (at most four) keys of
// that length by the byte that best tells them apart, and a comparison
// where that byte matches.
func FieldOf(key string) Field {
	if len(key) >= len(byLength) {
		return FieldNone
	}
	g := &byLength[len(key)]
	for i := range g.n {
		if e := &g.keys[i]; key[g.at] == e.b && e.key == key {
			return e.f
		}
	}
	return FieldNone
}

// maxKeysPerLength bounds the record's keys of one length (four are 25
// bytes long); byLength's construction panics, at init, beyond it.
const maxKeysPerLength = 6

// lengthGroup holds the record's keys of one length, mostly told apart by
// their byte at index at. Fixed arrays: no pointer to chase per lookup.
type lengthGroup struct {
	at   int
	n    uint8
	keys [maxKeysPerLength]struct {
		b   byte
		f   Field
		key string
	}
}

// byLength indexes the fields by key length (the longest key is 35 bytes).
var byLength = func() (t [40]lengthGroup) {
	for f := FieldJob; f < numFields; f++ {
		k := fieldKeys[f]
		g := &t[len(k)]
		g.keys[g.n].f, g.keys[g.n].key = f, k
		g.n++
	}
	for n := range t {
		g := &t[n]
		g.at = distinctAt(g.keys[:g.n], n)
		for i := range g.n {
			g.keys[i].b = g.keys[i].key[g.at]
		}
	}
	return t
}()

// distinctAt is the index at which the keys, all n bytes long, have the
// most distinct bytes.
func distinctAt(keys []struct {
	b   byte
	f   Field
	key string
}, n int) int {
	best, bestDistinct := 0, 0
	for at := 0; at < n; at++ {
		var seen [256]bool
		distinct := 0
		for _, e := range keys {
			if c := e.key[at]; !seen[c] {
				seen[c] = true
				distinct++
			}
		}
		if distinct > bestDistinct {
			best, bestDistinct = at, distinct
		}
	}
	return best
}

// Key is the field's attribute key ("" for FieldNone).
func (f Field) Key() string {
	if f >= numFields {
		return ""
	}
	return fieldKeys[f]
}

// OnResource reports whether the field may come from the resource: who the
// rank is may be set once per process; what a step measured is the span's.
func (f Field) OnResource() bool { return f >= FieldJob && f <= FieldLocalRank }

// Measured reports whether the field is one of a step's numeric measures
// (phases, tokens, loss, flops, the collectives' numbers, the health
// numbers): the signals a rule may read as samples.
func (f Field) Measured() bool {
	switch f {
	case FieldPhaseDataload, FieldPhaseForward, FieldPhaseBackward, FieldPhaseOptimizer, FieldPhaseCommWait,
		FieldCollectivesTailNs, FieldTokens, FieldLoss, FieldFlops,
		FieldCollectivesCount, FieldCollectivesTotalNs, FieldCollectivesMaxNs, FieldCollectivesAnomalies,
		FieldHealthSMActive, FieldHealthTemperature, FieldHealthNVLinkCRC, FieldHealthECCSBE, FieldHealthECCDBE,
		FieldHealthWindowS, FieldHealthIBSymbol, FieldHealthIBLinkDowned:
		return true
	}
	return false
}

// Fields is a set of fields.
type Fields uint64

// Has reports whether f is in the set.
func (s Fields) Has(f Field) bool { return s&(1<<f) != 0 }

func (f Field) bit() Fields { return 1 << f }
