package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/confirm"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

// noStoreDetail is the answer of an agent without the nodestate extension.
const noStoreDetail = "this agent keeps no readings of its own (verify::links::nodestate is empty): it confirms no fault"

// confirmer answers the confirm endpoint from the node's own readings.
type confirmer struct {
	devices Devices
	// store is the nodestate extension (nil: none, nothing is confirmed).
	store nodestate.Store
	// inventory is the store's GPU inventory (nil when it keeps none).
	inventory nodestate.Inventory
}

func newConfirmer(devices Devices, store nodestate.Store) *confirmer {
	c := &confirmer{devices: devices, store: store}
	if inv, ok := store.(nodestate.Inventory); ok {
		c.inventory = inv
	}
	return c
}

// gpus returns the node's GPUs (UUIDs) to look at for req: NVML's
// inventory. When NVML fails (a GPU that fell off the bus can make it
// fail) and the request names a GPU, that GPU alone when the node's own
// GPU receiver reported it (the store's inventory, which only the agent's
// receivers fill). Anything else is an error: the request is answered 503
// and nothing is confirmed.
func (c *confirmer) gpus(ctx context.Context, req repair.ConfirmRequest) ([]string, error) {
	inv, err := c.devices.Inventory(ctx)
	if err == nil {
		out := make([]string, len(inv))
		for i, g := range inv {
			out[i] = g.UUID
		}
		return out, nil
	}
	if req.GPUUUID != "" && c.inventory != nil && c.inventory.HasGPU(req.GPUUUID) {
		return []string{req.GPUUUID}, nil
	}
	return nil, fmt.Errorf("the GPU inventory could not be read (%w) and the nodestate extension does not know GPU %q", err, req.GPUUUID)
}

// confirmFault answers a ConfirmRequest: whether this node's own readings
// show the fault. Synchronous; it starts no job and changes nothing.
func (a *api) confirmFault(w http.ResponseWriter, ctx context.Context, body []byte) *refusal {
	var req repair.ConfirmRequest
	if f := a.decode(body, &req, &req.ID, &req.Node); f != nil {
		return f
	}
	bad := func(format string, args ...any) *refusal {
		return &refusal{http.StatusBadRequest, metadata.ReasonBadBody, fmt.Sprintf(format, args...)}
	}
	switch {
	case req.FaultID == "":
		return bad("fault_id is empty")
	case req.FaultType == "":
		return bad("fault_type is empty")
	case req.XID < 0:
		return bad("xid %d is negative", req.XID)
	}
	var out repair.Confirmation
	if a.confirm == nil || a.confirm.store == nil {
		out = repair.Confirmation{Detail: noStoreDetail}
	} else {
		gpus, err := a.confirm.gpus(ctx, req)
		if err != nil {
			return &refusal{http.StatusServiceUnavailable, metadata.ReasonUnavailable, err.Error()}
		}
		out = confirm.Confirm(a.confirm.store, req, gpus, a.now())
	}
	// Every answer is logged: it decides whether the gateway repairs.
	a.logger.Info("gpurepair: fault confirmation", zap.String("id", req.ID), zap.String("fault_id", req.FaultID),
		zap.String("fault_type", req.FaultType), zap.String("gpu", req.GPUUUID), zap.Int("xid", req.XID),
		zap.Bool("confirmed", out.Confirmed), zap.String("detail", out.Detail), zap.Strings("evidence", out.Evidence))
	writeJSON(w, http.StatusOK, out)
	return nil
}
