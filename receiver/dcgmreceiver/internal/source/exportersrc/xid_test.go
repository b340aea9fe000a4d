package exportersrc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func xidSample(index int, uuid string, code float64, mig *model.MIGInstance, pod string) model.GPUSample {
	return model.GPUSample{
		GPU:    model.GPU{Index: index, UUID: uuid, MIG: mig},
		Owner:  model.Owner{PodName: pod},
		Values: []model.Value{{Field: model.FieldXIDErrors, Float: code, IsFloat: true}},
	}
}

func scrapeAt(sec int64, samples ...model.GPUSample) model.Snapshot {
	return model.Snapshot{Time: time.Unix(sec, 0), GPUs: samples}
}

func codes(events []model.XIDEvent) []int {
	var out []int
	for _, e := range events {
		out = append(out, e.Code)
	}
	return out
}

func TestXIDTrackerReportsChangesAfterTheFirstScrape(t *testing.T) {
	var tracker xidTracker
	// First scrape: 43 may be days old, so it is only recorded.
	assert.Empty(t, tracker.observe(scrapeAt(1, xidSample(0, "GPU-a", 43, nil, ""), xidSample(1, "GPU-b", 0, nil, ""))))
	// Unchanged: nothing (a repeated 43 is invisible to this source).
	assert.Empty(t, tracker.observe(scrapeAt(2, xidSample(0, "GPU-a", 43, nil, ""), xidSample(1, "GPU-b", 0, nil, ""))))

	events := tracker.observe(scrapeAt(3, xidSample(0, "GPU-a", 79, nil, ""), xidSample(1, "GPU-b", 0, nil, "")))
	assert.Equal(t, []model.XIDEvent{{Time: time.Unix(3, 0), GPU: model.GPU{Index: 0, UUID: "GPU-a"}, Code: 79, Source: "exporter"}}, events)

	// Back to 0 is no event; 0 to 79 again is one.
	assert.Empty(t, tracker.observe(scrapeAt(4, xidSample(0, "GPU-a", 0, nil, ""), xidSample(1, "GPU-b", 0, nil, ""))))
	assert.Equal(t, []int{79, 48}, codes(tracker.observe(scrapeAt(5, xidSample(0, "GPU-a", 79, nil, ""), xidSample(1, "GPU-b", 48, nil, "")))))
}

func TestXIDTrackerOneEventPerGPUSharedByPods(t *testing.T) {
	var tracker xidTracker
	tracker.observe(scrapeAt(1, xidSample(0, "GPU-a", 0, nil, "p1"), xidSample(0, "GPU-a", 0, nil, "p2")))
	assert.Equal(t, []int{31}, codes(tracker.observe(scrapeAt(2, xidSample(0, "GPU-a", 31, nil, "p1"), xidSample(0, "GPU-a", 31, nil, "p2")))))
}

func TestXIDTrackerTellsMIGInstancesApart(t *testing.T) {
	var tracker xidTracker
	mig1 := &model.MIGInstance{GPUInstanceID: 1}
	mig2 := &model.MIGInstance{GPUInstanceID: 2}
	tracker.observe(scrapeAt(1, xidSample(0, "GPU-a", 0, mig1, ""), xidSample(0, "GPU-a", 0, mig2, "")))
	events := tracker.observe(scrapeAt(2, xidSample(0, "GPU-a", 0, mig1, ""), xidSample(0, "GPU-a", 94, mig2, "")))
	if assert.Len(t, events, 1) {
		assert.Equal(t, 94, events[0].Code)
		assert.Equal(t, mig2, events[0].GPU.MIG)
	}
}

func TestXIDTrackerGPUWithoutXIDValueKeepsItsState(t *testing.T) {
	var tracker xidTracker
	tracker.observe(scrapeAt(1, xidSample(0, "GPU-a", 13, nil, "")))
	// Present, but the XID sample is missing this time.
	tracker.observe(scrapeAt(2, model.GPUSample{GPU: model.GPU{UUID: "GPU-a"}, Values: []model.Value{{Field: model.FieldGPUTemp, Float: 40, IsFloat: true}}}))
	assert.Empty(t, tracker.observe(scrapeAt(3, xidSample(0, "GPU-a", 13, nil, ""))))
	assert.Equal(t, []int{45}, codes(tracker.observe(scrapeAt(4, xidSample(0, "GPU-a", 45, nil, "")))))
}

func TestXIDTrackerForgetsGPUsThatLeave(t *testing.T) {
	var tracker xidTracker
	tracker.observe(scrapeAt(1, xidSample(0, "GPU-a", 0, nil, ""), xidSample(1, "GPU-b", 0, nil, "")))
	tracker.observe(scrapeAt(2, xidSample(0, "GPU-a", 0, nil, "")))
	assert.NotContains(t, tracker.last, gpuKey{index: 1, uuid: "GPU-b"})
	// GPU-b comes back showing 79: treated as a first sight, not reported.
	assert.Empty(t, tracker.observe(scrapeAt(3, xidSample(0, "GPU-a", 0, nil, ""), xidSample(1, "GPU-b", 79, nil, ""))))
}

func TestXIDTrackerIgnoresValuesThatAreNoCode(t *testing.T) {
	var tracker xidTracker
	tracker.observe(scrapeAt(1, xidSample(0, "GPU-a", 0, nil, "")))
	assert.Empty(t, tracker.observe(scrapeAt(2, xidSample(0, "GPU-a", 12.5, nil, ""))))
	assert.Empty(t, tracker.observe(scrapeAt(3, xidSample(0, "GPU-a", -1, nil, ""))))
	assert.Equal(t, []int{8}, codes(tracker.observe(scrapeAt(4, model.GPUSample{
		GPU:    model.GPU{UUID: "GPU-a"},
		Values: []model.Value{{Field: model.FieldXIDErrors, Int: 8}},
	}))))
}
