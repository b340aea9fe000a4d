package provenanceprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The hot path: a batch of 64 steps of an 8-rank job from this node, all
// legitimate (nothing to rename): the cost every script's span pays.
func BenchmarkLegitimateSteps(b *testing.B) {
	benchTraces(b, own, ownGPUs[0])
}

// The attack: the same batch claiming another node and its GPU, where
// every resource is rewritten.
func BenchmarkForgedSteps(b *testing.B) {
	benchTraces(b, victim, victimGPU)
}

func benchTraces(b *testing.B, host, gpu string) {
	legitimate := host == own
	h := newHarness(b, true)
	sink := consumertest.NewNop()
	p, err := NewFactory().CreateTraces(context.Background(), h.set, h.cfg, sink)
	require.NoError(b, err)
	require.NoError(b, p.Start(context.Background(), h.host))
	defer func() { require.NoError(b, p.Shutdown(context.Background())) }()
	batch := ptrace.NewTraces()
	for range 64 {
		td := stepTraces(host, gpu)
		td.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
	}
	spans := batch.SpanCount()
	// A legitimate batch leaves the processor as it came: reuse it. A
	// forged one is rewritten: give each run a fresh copy, made outside
	// the timer.
	copies := !legitimate
	work := ptrace.NewTraces()
	if !copies {
		work = batch
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if copies {
			b.StopTimer()
			batch.CopyTo(work)
			b.StartTimer()
		}
		if err := p.ConsumeTraces(context.Background(), work); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
}
