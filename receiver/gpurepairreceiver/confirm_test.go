package gpurepairreceiver

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

// recordDBE records the node's own ECC readings of both GPUs from start,
// every 10s until now; from onset on gpu1's DBE count is dbeAfter.
func recordDBE(store *nodestate.MemoryStore, start, onset, now time.Time, dbeAfter uint64) {
	for at := start; !at.After(now); at = at.Add(10 * time.Second) {
		for _, g := range []string{gpu0, gpu1} {
			var s nodestate.GPUSample
			s.SMActive = nodestate.Gauge{Value: 0, Valid: true}
			v := uint64(5)
			if g == gpu1 && !at.Before(onset) {
				v = dbeAfter
			}
			s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: v, Start: start.Add(-time.Hour), Valid: true}
			store.RecordGPU(g, at, s)
		}
	}
}

func confirmReq(id string, onset time.Time) repair.ConfirmRequest {
	return repair.ConfirmRequest{ID: id, Node: testNode, FaultID: "f-1", FaultType: string(fault.TypeGPUMemoryDBE), GPUUUID: gpu1, Since: onset}
}

// The node confirms a fault its own readings show, with the evidence, and
// not one they do not: through the HTTP API and the client.
func TestConfirm(t *testing.T) {
	now := time.Now()
	start, onset := now.Add(-5*time.Minute), now.Add(-2*time.Minute)
	for name, c := range map[string]struct {
		dbe       uint64
		confirmed bool
	}{
		"the node's own readings show it": {dbe: 7, confirmed: true},
		"quiet readings":                  {dbe: 5, confirmed: false},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			recordDBE(e.store, start, onset, now, c.dbe)
			got, err := e.client.Confirm(context.Background(), testNode, confirmReq("c1", onset))
			require.NoError(t, err)
			assert.Equal(t, c.confirmed, got.Confirmed, got.Detail)
			if c.confirmed {
				require.Len(t, got.Evidence, 1)
				assert.Contains(t, got.Evidence[0], gpu1+": ecc")
				assert.Contains(t, got.Evidence[0], "+2")
			} else {
				assert.Empty(t, got.Evidence)
				assert.Contains(t, got.Detail, "none of this node's own readings")
			}
			logged := e.logs.FilterMessage("gpurepair: fault confirmation").All()
			require.Len(t, logged, 1)
			assert.Equal(t, c.confirmed, logged[0].ContextMap()["confirmed"])
			assert.Equal(t, "f-1", logged[0].ContextMap()["fault_id"])
		})
	}

	t.Run("a GPU not of this node", func(t *testing.T) {
		e := newEnv(t)
		recordDBE(e.store, start, onset, now, 7)
		req := confirmReq("c1", onset)
		req.GPUUUID = "GPU-99999999-9999-4999-8999-999999999999"
		got, err := e.client.Confirm(context.Background(), testNode, req)
		require.NoError(t, err)
		assert.False(t, got.Confirmed)
		assert.Contains(t, got.Detail, "not one of this node's GPUs")
	})
}

// NVML failing: the GPU named is looked at when the node's own GPU
// receiver reported it; otherwise 503, nothing confirmed.
func TestConfirmWithoutInventory(t *testing.T) {
	now := time.Now()
	start, onset := now.Add(-5*time.Minute), now.Add(-2*time.Minute)
	d := newFakeDevices()
	d.invErr = errNVML
	e := newEnv(t, withDevices(d))
	recordDBE(e.store, start, onset, now, 7)
	got, err := e.client.Confirm(context.Background(), testNode, confirmReq("c1", onset))
	require.NoError(t, err)
	assert.True(t, got.Confirmed, got.Detail)

	unknown := confirmReq("c2", onset)
	unknown.GPUUUID = "GPU-99999999-9999-4999-8999-999999999999"
	_, err = e.client.Confirm(context.Background(), testNode, unknown)
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(err))
	noGPU := confirmReq("c3", onset)
	noGPU.GPUUUID = ""
	_, err = e.client.Confirm(context.Background(), testNode, noGPU)
	assert.Equal(t, http.StatusServiceUnavailable, statusOf(err))
}

// Without the nodestate extension nothing is confirmed, and the answer
// says why.
func TestConfirmWithoutNodeState(t *testing.T) {
	e := newEnv(t, withConfig(func(c *Config) { c.Verify.Links.NodeState = "" }))
	recordDBE(e.store, time.Now().Add(-5*time.Minute), time.Now().Add(-2*time.Minute), time.Now(), 7)
	got, err := e.client.Confirm(context.Background(), testNode, confirmReq("c1", time.Now().Add(-2*time.Minute)))
	require.NoError(t, err)
	assert.False(t, got.Confirmed)
	assert.Equal(t, noStoreDetail, got.Detail)
}

// The confirm endpoint is on the same rails as the others: signed, for
// this node, fresh, strict JSON.
func TestConfirmRefusals(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	body := func(req repair.ConfirmRequest) []byte {
		b, err := json.Marshal(req)
		require.NoError(t, err)
		return b
	}
	good := confirmReq("c1", now.Add(-time.Minute))
	otherNode := good
	otherNode.Node = "node-b"
	noFault := good
	noFault.FaultID = ""
	noType := good
	noType.FaultType = ""
	negXID := good
	negXID.XID = -1
	cases := []struct {
		name   string
		req    *http.Request
		status int
		reason string
	}{
		{"signed for another node", e.signed(e.key, http.MethodPost, repair.PathConfirm, "node-b", "r1", body(otherNode), now), http.StatusForbidden, metadata.ReasonWrongNode},
		{"body for another node", e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r2", body(otherNode), now), http.StatusForbidden, metadata.ReasonWrongNode},
		{"another key", e.signed(testKey(2), http.MethodPost, repair.PathConfirm, testNode, "r3", body(good), now), http.StatusUnauthorized, metadata.ReasonBadSignature},
		{"stale", e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r4", body(good), now.Add(-time.Hour)), http.StatusUnauthorized, metadata.ReasonStale},
		{"repeated key", e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r5",
			[]byte(`{"id":"c1","node":"node-a","fault_id":"f-1","fault_type":"gpu.memory.dbe","fault_type":"ib.link_flap","since":"2026-01-01T00:00:00Z"}`), now),
			http.StatusBadRequest, metadata.ReasonRepeatedKey},
		{"unknown field", e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r6",
			[]byte(`{"id":"c1","node":"node-a","fault_id":"f-1","fault_type":"gpu.memory.dbe","since":"2026-01-01T00:00:00Z","force":true}`), now),
			http.StatusBadRequest, metadata.ReasonBadBody},
		{"no fault id", e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r7", body(noFault), now), http.StatusBadRequest, metadata.ReasonBadBody},
		{"no fault type", e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r8", body(noType), now), http.StatusBadRequest, metadata.ReasonBadBody},
		{"negative xid", e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r9", body(negXID), now), http.StatusBadRequest, metadata.ReasonBadBody},
		{"wrong method", e.signed(e.key, http.MethodGet, repair.PathConfirm, testNode, "r10", nil, now), http.StatusMethodNotAllowed, metadata.ReasonNotFound},
	}
	want := map[string]int64{}
	for _, c := range cases {
		status, msg := e.raw(c.req)
		assert.Equal(t, c.status, status, "%s: %s", c.name, msg)
		want[c.reason]++
	}

	// A replay of an answered request.
	status, msg := e.raw(e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r-once", body(good), now))
	require.Equal(t, http.StatusOK, status, msg)
	status, _ = e.raw(e.signed(e.key, http.MethodPost, repair.PathConfirm, testNode, "r-once", body(good), now))
	assert.Equal(t, http.StatusUnauthorized, status, "replay")
	want[metadata.ReasonReplay]++
	assert.Equal(t, want, e.refused())
	assert.Len(t, e.logs.FilterMessage("gpurepair: fault confirmation").All(), 1, "only the answered request was decided")
}
