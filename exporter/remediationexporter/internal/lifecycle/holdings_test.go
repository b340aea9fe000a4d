package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHoldingsListTheNodesHeld(t *testing.T) {
	s := New(cooldown)
	assert.Empty(t, s.Holdings())
	quarantined(s, "f2", "n2", true, "")
	s.Open("f1", "n2", true, t0.Add(time.Minute))
	s.OpenOnNode("n2", "f1")
	s.Quarantined("f1", "n2", nodeAction, true, "")
	quarantined(s, "dbe", "n1", false, "DBE: the GPU needs a human")
	quarantined(s, "nv", "n3", false, "")
	s.Open("other", "n4", true, t0) // open, never quarantined: not listed

	hs := s.Holdings()
	require.Len(t, hs, 3)
	assert.Equal(t, Holding{Node: "n1", FaultIDs: []string{"dbe"}, Actions: nodeAction, Since: t0,
		Reason: "waits for a human: DBE: the GPU needs a human (fault dbe)"}, hs[0])
	assert.Equal(t, Holding{Node: "n2", FaultIDs: []string{"f1", "f2"}, Actions: nodeAction, Since: t0,
		Reason: "returns to service once its faults resolve and the verification window passes"}, hs[1], "since: its first fault of ours")
	assert.Equal(t, "the policy does not return the node to service after fault nv: a human releases it", hs[2].Reason)

	s.Resolve("f1", "n2", t0)
	s.Resolve("f2", "n2", t0)
	h, ok := s.Holding("n2")
	require.True(t, ok)
	assert.True(t, h.ReleasePending)
	assert.Contains(t, h.Reason, "verification window")
	h.FaultIDs[0] = "changed"
	h2, _ := s.Holding("n2")
	assert.Equal(t, []string{"f1", "f2"}, h2.FaultIDs, "a copy")

	_, ok = s.Holding("n4")
	assert.False(t, ok)
	assert.True(t, s.HasFault("other"))
	assert.False(t, s.HasFault("never"))
}

func TestBeginManualReleaseTakesEveryFaultOfOurs(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", true, "")
	quarantined(s, "f2", "n1", false, "")
	_, ok := s.BeginManualRelease("n9")
	assert.False(t, ok, "not held")
	rel, ok := s.BeginManualRelease("n1")
	require.True(t, ok)
	assert.Equal(t, Release{Node: "n1", FaultIDs: []string{"f1", "f2"}, Actions: nodeAction}, rel)
	assert.Equal(t, 1, s.QuarantinedNodes(), "nothing changes until Released")
	s.Released("n1", t0)
	_, ok = s.BeginManualRelease("n1")
	assert.False(t, ok)
	assert.Empty(t, s.Holdings())
}
