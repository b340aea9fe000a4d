package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

const (
	// xidRetryInterval is how often XID records the logs pipeline refused
	// are offered again.
	xidRetryInterval = time.Second
	// maxPendingXIDs bounds the refused XID records kept for a retry;
	// beyond it the oldest is dropped and counted.
	maxPendingXIDs = 1024
)

// pendingXID is an XID record not yet accepted downstream, kept as what
// builds it: a refused plog.Logs may have been changed by the pipeline.
type pendingXID struct {
	ev       model.XIDEvent
	gpu      model.GPU
	owner    model.Owner
	observed time.Time
}

// xidLoop turns XID events into log records and per-GPU counts. An XID is a
// fault signal no later record repeats, so a record the logs pipeline
// refuses (the agent's queue, full during a Kafka outage, refuses at once
// rather than block: issue 29) is kept and offered again, in order, every
// xidRetryInterval, until accepted; at most maxPendingXIDs wait (the oldest
// beyond that is dropped and counted). What is still refused at shutdown is
// logged.
func (r *dcgmReceiver) xidLoop(ctx context.Context) {
	// The retry timer runs only while records wait: an agent whose
	// pipeline accepts has no wakeup here (issue 32).
	retry := time.NewTimer(xidRetryInterval)
	retry.Stop()
	defer retry.Stop()
	var retryC <-chan time.Time
	var pending []pendingXID
	refused := false
	for {
		select {
		case <-ctx.Done():
			if len(pending) > 0 {
				r.logger.Warn("dcgmreceiver: XID records refused by the logs pipeline until shutdown are lost", zap.Int("records", len(pending)))
			}
			return
		case <-retryC:
			retryC = nil
		case ev := <-r.xidEvents:
			gpu := r.resolveGPU(ev.GPU)
			r.mu.Lock()
			k := gpuKey(gpu)
			if r.xidCounts[k] == nil {
				r.xidCounts[k] = map[int]int64{}
			}
			r.xidCounts[k][ev.Code]++
			r.mu.Unlock()
			if r.nextLogs == nil {
				continue
			}
			pending = append(pending, pendingXID{ev: ev, gpu: gpu, owner: r.owner(model.GPUSample{GPU: gpu}), observed: r.deps.now()})
			if over := len(pending) - maxPendingXIDs; over > 0 {
				r.tb.DcgmXidEventsDropped.Add(ctx, int64(over))
				r.logger.Error("dcgmreceiver: XID records dropped: the logs pipeline refused them too long", zap.Int("records", over))
				pending = pending[over:]
			}
		}
		pending, refused = r.offerXIDs(ctx, pending, refused)
		switch {
		case len(pending) == 0 && retryC != nil:
			retry.Stop()
			retryC = nil
		case len(pending) > 0 && retryC == nil:
			retry.Reset(xidRetryInterval)
			retryC = retry.C
		}
	}
}

// offerXIDs hands the pending records on, oldest first, and stops at the
// first refusal; it logs once when refusals start and once when they end.
func (r *dcgmReceiver) offerXIDs(ctx context.Context, pending []pendingXID, refused bool) ([]pendingXID, bool) {
	for len(pending) > 0 {
		p := pending[0]
		if err := r.nextLogs.ConsumeLogs(ctx, r.logs.xidLogs(p.ev, p.gpu, p.owner, p.observed)); err != nil {
			if !refused {
				r.logger.Error("dcgmreceiver: XID record refused by the logs pipeline; offered again every second",
					zap.Int("xid", p.ev.Code), zap.Int("pending", len(pending)), zap.Error(err))
			}
			return pending, true
		}
		pending[0] = pendingXID{}
		pending = pending[1:]
	}
	if refused {
		r.logger.Info("dcgmreceiver: the logs pipeline accepts XID records again")
	}
	return pending, false
}
