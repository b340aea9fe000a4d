package exportersrc

import (
	"math"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// SourceName is the XIDEvent.Source of events this package reports.
const SourceName = "exporter"

// gpuKey identifies a GPU or MIG instance across scrapes, whatever pods
// the exporter attributes it to.
type gpuKey struct {
	index  int
	uuid   string
	isMIG  bool
	gi, ci int
}

func keyOf(gpu model.GPU) gpuKey {
	k := gpuKey{index: gpu.Index, uuid: gpu.UUID}
	if gpu.MIG != nil {
		k.isMIG, k.gi, k.ci = true, gpu.MIG.GPUInstanceID, gpu.MIG.ComputeInstanceID
	}
	return k
}

// xidTracker turns DCGM_FI_DEV_XID_ERRORS, which only holds the last XID a
// GPU raised, into events: one each time the value changes to a non-zero
// code between scrapes.
//
// What it cannot see: a GPU raising the same XID again (the value does not
// change), several XIDs between two scrapes (only the last survives), and
// the XID a GPU already shows on the first scrape (it may be days old, so
// it is recorded, not reported). Sources that read every occurrence (dcgm,
// nvml, kmsg) do not have these gaps.
type xidTracker struct {
	last map[gpuKey]int
}

// observe compares a scrape with the previous one and returns the events.
// GPUs absent from the scrape are forgotten, so a GPU that comes back is
// treated as new.
func (t *xidTracker) observe(snap model.Snapshot) []model.XIDEvent {
	var events []model.XIDEvent
	next := make(map[gpuKey]int, len(snap.GPUs))
	for _, sample := range snap.GPUs {
		key := keyOf(sample.GPU)
		code, ok := xidCode(sample.Values)
		if !ok {
			continue
		}
		if _, done := next[key]; done {
			continue // the same GPU repeated for another pod
		}
		next[key] = code
		prev, known := t.last[key]
		if known && code != 0 && code != prev {
			events = append(events, model.XIDEvent{
				Time:   snap.Time,
				GPU:    sample.GPU,
				Code:   code,
				Source: SourceName,
			})
		}
	}
	// A GPU present without a readable XID value this time keeps what was
	// known about it.
	for _, sample := range snap.GPUs {
		key := keyOf(sample.GPU)
		if _, done := next[key]; done {
			continue
		}
		if prev, known := t.last[key]; known {
			next[key] = prev
		}
	}
	t.last = next
	return events
}

// xidCode returns the XID field's value as an integer code.
func xidCode(values []model.Value) (int, bool) {
	for _, v := range values {
		if v.Field != model.FieldXIDErrors {
			continue
		}
		f := v.AsFloat()
		if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			return 0, false
		}
		return int(f), true
	}
	return 0, false
}
