package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// quarantined opens fault id on node and holds the node for it.
func quarantined(s *State, id, node string, release bool, hold string) {
	s.Open(id, node, release, t0)
	s.OpenOnNode(node, id)
	s.Quarantined(id, node, nodeAction, true, hold)
}

func TestResolveSchedulesTheRelease(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f2", "n1", true, "")
	quarantined(s, "f1", "n1", true, "")
	assert.Equal(t, ReleaseDecision{Skip: "node has 1 other open fault(s)", Rail: RailOpenFaults, Release: Release{Node: "n1", Actions: nodeAction}},
		s.Resolve("f1", "n1", t0).Release)
	res := s.Resolve("f2", "n1", t0)
	assert.Equal(t, Resolution{Node: "n1", Release: ReleaseDecision{Schedule: true,
		Release: Release{Node: "n1", FaultIDs: []string{"f1", "f2"}, Actions: nodeAction}}}, res)
	assert.Equal(t, "duplicate: fault already resolved", s.Resolve("f2", "n1", t0).Skip)

	rel, ok := s.BeginRelease("n1")
	require.True(t, ok)
	assert.Equal(t, Release{Node: "n1", FaultIDs: []string{"f1", "f2"}, Actions: nodeAction}, rel)
	_, ok = s.BeginRelease("n1")
	assert.False(t, ok, "one release per window")
}

func TestReleaseHeldForAHuman(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "dbe", "n1", false, "DBE: the GPU needs a human")
	quarantined(s, "nv", "n1", true, "")
	s.Resolve("nv", "n1", t0)
	d := s.Resolve("dbe", "n1", t0).Release
	assert.Equal(t, "waits for a human: DBE: the GPU needs a human (fault dbe)", d.Skip, "the hold wins")
	assert.False(t, d.Schedule)
	assert.Equal(t, RailHold, d.Rail)
	assert.Equal(t, 1, s.QuarantinedNodes(), "held until a human releases it")
}

func TestReleaseNotAllowedByThePolicy(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", false, "")
	d := s.Resolve("f1", "n1", t0).Release
	assert.Equal(t, "the policy does not return the node to service after fault f1", d.Skip)
	assert.Equal(t, RailPolicy, d.Rail)
}

func TestReleaseWaitsForEveryFaultOfOurs(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", true, "")
	// f2 first named another node, so it is not counted open on n1.
	s.Open("f2", "n2", true, t0)
	s.Quarantined("f2", "n1", nodeAction, true, "")
	assert.Equal(t, ReleaseDecision{}, s.Resolve("f1", "n1", t0).Release, "f2 of ours is still open")
}

func TestOpenOnNodeCancelsThePendingRelease(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", true, "")
	require.True(t, s.Resolve("f1", "n1", t0).Release.Schedule)

	s.Open("f2", "n1", true, t0)
	cancelled, ok := s.OpenOnNode("n1", "f2")
	require.True(t, ok)
	assert.Equal(t, Release{Node: "n1", Actions: nodeAction}, cancelled)
	_, ok = s.BeginRelease("n1")
	assert.False(t, ok, "the window's timer finds nothing to release")
	_, ok = s.OpenOnNode("n1", "f3")
	assert.False(t, ok, "nothing pending any more")
}

func TestCancelReleaseKeepsTheQuarantine(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", true, "")
	require.True(t, s.Resolve("f1", "n1", t0).Release.Schedule)
	_, ok := s.CancelRelease("n1")
	require.True(t, ok)
	_, ok = s.CancelRelease("n1")
	assert.False(t, ok)
	assert.Equal(t, 1, s.HoldQuarantined("restart"), "still held")
}

func TestReleasedForgetsTheQuarantine(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", true, "")
	require.True(t, s.Resolve("f1", "n1", t0).Release.Schedule)
	_, ok := s.BeginRelease("n1")
	require.True(t, ok)
	s.Released("n1", t0.Add(time.Hour))
	assert.Zero(t, s.HoldQuarantined("restart"))
	assert.Contains(t, s.PlanQuarantine("f9", "n1", nodeAction, t0.Add(time.Hour+time.Minute)).Skip, "cooldown")
}

func TestQuarantinedNodes(t *testing.T) {
	s := New(cooldown)
	assert.Zero(t, s.QuarantinedNodes())
	quarantined(s, "f1", "n1", true, "")
	quarantined(s, "f2", "n1", true, "")
	quarantined(s, "f3", "n2", true, "")
	s.Open("f4", "n3", true, t0)
	s.Quarantined("f4", "n3", nodeAction, false, "") // left alone by the platform: not ours
	assert.Equal(t, 2, s.QuarantinedNodes(), "nodes, not faults; a node left alone is not counted")
	s.Released("n1", t0)
	assert.Equal(t, 1, s.QuarantinedNodes())
}
