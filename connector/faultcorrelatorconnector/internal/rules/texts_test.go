package rules

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Texts are held while a kept sample has them: a series that expires them,
// the sweep of a silent series and a forgotten entity all release theirs, so
// a stream of distinct texts (finding messages, say) cannot grow the table.
func TestTextsAreReleasedWithTheirSamples(t *testing.T) {
	r := Rule{Name: "v", FaultType: fault.TypeStragglerCompute, Severity: fault.SeverityP3, Action: fault.ActionNone,
		BlastRadius: fault.BlastGPU, Confidence: 1, Entity: fault.EntityRank, Window: time.Minute,
		All: []Condition{{Signal: "straggler.verdict", In: []any{"compute"}}}}
	ev := NewEvaluator([]Rule{r}, Limits{MaxSamplesPerSeries: 8, ForgetAfter: 10 * time.Minute})
	text := func(i int) string { return "verdict-" + strconv.Itoa(i) }
	for i := 0; i < 100; i++ {
		ev.ObserveSample(rankR, Sample{Signal: "straggler.verdict", Text: text(i % 20), At: t0.Add(time.Duration(i) * time.Second)})
	}
	assert.Equal(t, 8, ev.texts.len(), "only the texts of the 8 samples kept")
	ev.ObserveSample(rankR, Sample{Signal: "straggler.verdict", Text: "compute", At: t0.Add(100 * time.Second)})
	ms := ev.Evaluate(t0.Add(101 * time.Second))
	require.Len(t, ms, 1)
	assert.Equal(t, "compute", ms[0].Evidence[0].Text)
	assert.Equal(t, t0.Add(100*time.Second), ms[0].Evidence[0].Time)

	// The same texts again reuse their ids; the table never outgrows what is kept.
	for i := 0; i < 100; i++ {
		ev.ObserveSample(rankR, Sample{Signal: "straggler.verdict", Text: text(i % 3), At: t0.Add(time.Duration(200+i) * time.Second)})
	}
	assert.Equal(t, 3, ev.texts.len())
	assert.LessOrEqual(t, len(ev.texts.texts), 1+9, "ids are reused, not appended")

	// The sweep of a silent series, then forgetting the entity, release the rest.
	ev.Evaluate(t0.Add(302*time.Second + sweepEvery))
	assert.Zero(t, ev.texts.len(), "the rank's series fell silent beyond its window")
	ev.ObserveSample(rankR, Sample{Signal: "straggler.verdict", Text: "link", At: t0.Add(400 * time.Second)})
	assert.Equal(t, 1, ev.texts.len())
	ev.Evaluate(t0.Add(time.Hour))
	assert.Zero(t, ev.Entities())
	assert.Zero(t, ev.texts.len())
}
