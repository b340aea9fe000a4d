package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPruneForgetsOldFaultsAndIdleNodes(t *testing.T) {
	s := New(cooldown)
	s.Open("resolved", "n1", true, t0)
	s.OpenOnNode("n1", "resolved")
	s.Resolve("resolved", "n1", t0)
	s.Open("silent", "n2", true, t0)
	s.OpenOnNode("n2", "silent")
	quarantined(s, "held", "n3", false, "")

	s.Prune(t0.Add(ResolvedRetention + time.Minute))
	assert.Equal(t, 2, s.Faults(), "the resolved fault goes after a day")
	assert.NotContains(t, s.nodes, "n1", "and its idle node with it")

	s.Prune(t0.Add(ResolvedRetention + time.Minute + PruneEvery/2))
	s.Prune(t0.Add(OpenRetention + time.Hour))
	assert.Equal(t, 1, s.Faults(), "an open fault goes after a week of silence; one holding a node stays")
	assert.NotContains(t, s.nodes, "n2")
	assert.Contains(t, s.nodes, "n3")
	assert.True(t, s.Open("silent", "n2", true, t0.Add(OpenRetention+time.Hour)), "a forgotten fault is new again")
}

func TestPruneSweepsAtMostOncePerInterval(t *testing.T) {
	s := New(cooldown)
	s.Prune(t0)
	s.Open("f1", "", true, t0)
	s.Resolve("f1", "", t0)
	s.Prune(t0.Add(PruneEvery - time.Second))
	assert.Equal(t, 1, s.Faults())
}

func TestPruneKeepsNodesInTheirCooldown(t *testing.T) {
	s := New(cooldown)
	quarantined(s, "f1", "n1", true, "")
	s.Resolve("f1", "n1", t0)
	s.BeginRelease("n1")
	s.Released("n1", t0)
	s.Prune(t0.Add(cooldown / 2))
	assert.Contains(t, s.nodes, "n1")
	s.Prune(t0.Add(cooldown + time.Minute))
	assert.NotContains(t, s.nodes, "n1")
}
