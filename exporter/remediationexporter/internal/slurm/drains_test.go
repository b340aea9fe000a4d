package slurm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDrainMarkStill(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.Local)
	m := drainMark{reason: "otelcol-gpu: gpu.ecc.dbe f1", at: at}
	assert.True(t, m.still(nodeInfo{Reason: m.reason, ReasonTime: at}))
	assert.False(t, m.still(nodeInfo{Reason: m.reason, ReasonTime: at.Add(time.Second)}), "our words, a later drain")
	assert.False(t, m.still(nodeInfo{Reason: "admin: fan check", ReasonTime: at}))
	// Not read back: the reason alone.
	assert.True(t, drainMark{reason: m.reason}.still(nodeInfo{Reason: m.reason, ReasonTime: at.Add(time.Hour)}))

	var d drainMarks
	_, held := d.get("n1")
	assert.False(t, held)
	d.record("n1", m)
	got, held := d.get("n1")
	assert.True(t, held)
	assert.Equal(t, m, got)
	d.forget("n1")
	_, held = d.get("n1")
	assert.False(t, held)
}
