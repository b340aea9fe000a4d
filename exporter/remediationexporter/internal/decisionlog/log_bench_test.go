package decisionlog

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
)

// BenchmarkCatchUpCurrent: the catch-up before a decision when nothing
// new was decided elsewhere (one ListOffsets round trip to kfake).
func BenchmarkCatchUpCurrent(b *testing.B) {
	c := newCluster(b, kfake.SeedTopics(3, topic))
	l := newLog(b, c, 1<<20, zap.NewNop())
	ctx := context.Background()
	for i := range 100 {
		if err := l.Publish(ctx, decision(i, "other", t0)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.CatchUp(ctx, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublish: one decision appended and waited for (acks=all,
// idempotent producer) on kfake.
func BenchmarkPublish(b *testing.B) {
	c := newCluster(b, kfake.SeedTopics(3, topic))
	l := newLog(b, c, 1<<20, zap.NewNop())
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := l.Publish(ctx, decision(i, "bench", t0)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCatchUpFromStart: a replica starting on a log of 10,000
// decisions reads them all (per op: the whole log).
func BenchmarkCatchUpFromStart(b *testing.B) {
	c := newCluster(b, kfake.SeedTopics(3, topic))
	w := newLog(b, c, 1<<20, zap.NewNop())
	ctx := context.Background()
	for i := range 10_000 {
		if err := w.Publish(ctx, decision(i, "other", t0)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		r := newLog(b, c, 1<<20, zap.NewNop())
		b.StartTimer()
		ds, err := r.CatchUp(ctx, t0)
		if err != nil || len(ds) != 10_000 {
			b.Fatalf("%d decisions, %v", len(ds), err)
		}
		b.StopTimer()
		r.Close()
		b.StartTimer()
	}
}
