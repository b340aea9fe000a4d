// Package confirm decides whether a node's own hardware signals show a
// fault the gateway wants to repair. It reads only the nodestate store,
// which only the agent's own receivers fill (what arrives over OTLP reaches
// it after provenance renamed every hardware signal), so a fault that rests
// on signals another writer of the input topics forged about this node is
// not confirmed here, and the gateway repairs nothing (docs/security.md,
// "Repair actions"). It is pure: the caller passes the store and the time.
package confirm // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/confirm"

import (
	"fmt"
	"slices"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Bounds of the window the agent looks at: from Margin before the fault's
// onset (a counter's growth is seen at the scrape after it) to now, and
// never further back than MaxLookback (what the store keeps is bounded too).
const (
	Margin      = 2 * time.Minute
	MaxLookback = 24 * time.Hour
	// StaleAfter: a GPU whose newest reading is older than this no longer
	// answers (what gpu.unresponsive and gpu.fell_off_bus claim).
	StaleAfter = 2 * time.Minute
)

// XIDs that confirm a memory fault (DBE, contained/uncontained ECC error),
// an NVLink fault and a GPU that fell off the bus (DOMAIN.md's XID table).
var (
	memoryXIDs  = []int{48, 63, 64, 94, 95}
	nvlinkXIDs  = []int{74}
	offBusXIDs  = []int{79}
	nvlinkCntrs = []nodestate.GPUCounter{nodestate.NVLinkCRCFlitErrors, nodestate.NVLinkCRCDataErrors,
		nodestate.NVLinkReplayErrors, nodestate.NVLinkRecoveryErrors}
	dbeCntrs = []nodestate.GPUCounter{nodestate.ECCDBEVolatile, nodestate.ECCDBEAggregate}
	sbeCntrs = []nodestate.GPUCounter{nodestate.ECCSBEVolatile, nodestate.ECCSBEAggregate}
)

// Store is what confirmation reads of the nodestate extension.
type Store interface {
	GPUHealth(uuid string, from, to time.Time) (nodestate.GPUHealth, bool)
	NodeIBHealth(from, to time.Time) (nodestate.IBHealth, bool)
}

// Confirm answers req from the node's own signals in store at now. gpus are
// the node's GPUs (its inventory): a fault naming no GPU is looked for on
// each of them.
func Confirm(store Store, req repair.ConfirmRequest, gpus []string, now time.Time) repair.Confirmation {
	from := req.Since.Add(-Margin)
	if req.Since.IsZero() || now.Sub(from) > MaxLookback {
		from = now.Add(-MaxLookback)
	}
	if from.After(now) {
		from = now.Add(-Margin) // an onset in the future (a skewed clock): look at the recent past
	}
	targets := gpus
	if req.GPUUUID != "" {
		if !slices.Contains(gpus, req.GPUUUID) {
			return no(fmt.Sprintf("GPU %s is not one of this node's GPUs", req.GPUUUID))
		}
		targets = []string{req.GPUUUID}
	}
	var c check
	switch fault.Type(req.FaultType) {
	case fault.TypeGPUMemoryDBE:
		c = gpuCheck{counters: dbeCntrs, xids: memoryXIDs}
	case fault.TypeNVLinkDegraded:
		c = gpuCheck{counters: nvlinkCntrs, xids: nvlinkXIDs}
	case fault.TypeGPUECCSBERate:
		c = gpuCheck{counters: sbeCntrs}
	case fault.TypeGPUFellOffBus:
		c = gpuCheck{xids: offBusXIDs, stale: true}
	case fault.TypeGPUUnresponsive:
		c = gpuCheck{stale: true}
	case fault.TypeGPUXID:
		if req.XID <= 0 {
			return no("an XID fault without its code")
		}
		c = gpuCheck{xids: []int{req.XID}}
	case fault.TypeIBLinkFlap:
		c = ibCheck{}
	default:
		return no(fmt.Sprintf("no hardware signal of this node can show a %q fault: nothing to repair", req.FaultType))
	}
	return c.confirm(store, targets, from, now)
}

type check interface {
	confirm(store Store, gpus []string, from, to time.Time) repair.Confirmation
}

// gpuCheck confirms when a listed counter grew, a listed XID occurred, or
// (stale) the GPU's newest reading is old, on any of the GPUs.
type gpuCheck struct {
	counters []nodestate.GPUCounter
	xids     []int
	stale    bool
}

func (c gpuCheck) confirm(store Store, gpus []string, from, to time.Time) repair.Confirmation {
	var evidence []string
	for _, uuid := range gpus {
		h, ok := store.GPUHealth(uuid, from, to)
		if !ok {
			if c.stale {
				evidence = append(evidence, uuid+": no reading at all")
			}
			continue
		}
		for _, k := range c.counters {
			if d := h.Counters[k]; d.Valid && d.Delta > 0 {
				evidence = append(evidence, fmt.Sprintf("%s: %s +%d since %s", uuid, k, d.Delta, d.Since.UTC().Format(time.RFC3339)))
			}
		}
		for _, x := range h.XIDs {
			if x.Count > 0 && slices.Contains(c.xids, x.Code) {
				evidence = append(evidence, fmt.Sprintf("%s: XID %d x%d", uuid, x.Code, x.Count))
			}
		}
		if c.stale {
			if newest := newestReading(h); to.Sub(newest) > StaleAfter {
				evidence = append(evidence, fmt.Sprintf("%s: newest reading %s old", uuid, to.Sub(newest).Round(time.Second)))
			}
		}
	}
	if len(evidence) == 0 {
		return no(fmt.Sprintf("none of this node's own readings of %d GPU(s) since %s shows the fault", len(gpus), from.UTC().Format(time.RFC3339)))
	}
	return repair.Confirmation{Confirmed: true, Detail: "this node's own readings show the fault", Evidence: evidence}
}

func newestReading(h nodestate.GPUHealth) time.Time {
	newest := h.SMActive.At
	for _, t := range []time.Time{h.TemperatureC.At, h.ThrottleReasons.At} {
		if t.After(newest) {
			newest = t
		}
	}
	for _, d := range h.Counters {
		if d.Valid && d.Until.After(newest) {
			newest = d.Until
		}
	}
	return newest
}

// ibCheck confirms a link flap from the node's ports: link downs or link
// error recoveries grew.
type ibCheck struct{}

func (ibCheck) confirm(store Store, _ []string, from, to time.Time) repair.Confirmation {
	h, ok := store.NodeIBHealth(from, to)
	if !ok {
		return no("no InfiniBand reading on this node")
	}
	var evidence []string
	for _, p := range h.Ports {
		for _, k := range []nodestate.IBCounter{nodestate.IBLinkDowned, nodestate.IBLinkErrorRecovery} {
			if d := p.Counters[k]; d.Valid && d.Delta > 0 {
				evidence = append(evidence, fmt.Sprintf("%s/%s: %s +%d", p.Device, p.Port, k, d.Delta))
			}
		}
	}
	if len(evidence) == 0 {
		return no("no InfiniBand port of this node went down or recovered since " + from.UTC().Format(time.RFC3339))
	}
	return repair.Confirmation{Confirmed: true, Detail: "this node's own port counters show the flap", Evidence: evidence}
}

func no(detail string) repair.Confirmation { return repair.Confirmation{Detail: detail} }
