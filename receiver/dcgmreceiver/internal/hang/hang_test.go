package hang

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDoReturnsResult(t *testing.T) {
	g := NewGuard()
	want := errors.New("boom")
	if err := g.Do(context.Background(), "gpu0", time.Second, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Do = %v, want %v", err, want)
	}
	if g.Stuck("gpu0") {
		t.Fatal("gpu0 stuck after its call returned")
	}
}

func TestStuckCallBlocksOnlyItsKey(t *testing.T) {
	g := NewGuard()
	release := make(chan struct{})
	err := g.Do(context.Background(), "gpu0", 10*time.Millisecond, func() error { <-release; return nil })
	if !errors.Is(err, ErrStuck) {
		t.Fatalf("Do = %v, want ErrStuck", err)
	}
	if !g.Stuck("gpu0") {
		t.Fatal("gpu0 should be stuck")
	}
	// A second call for the stuck GPU fails at once, without a goroutine.
	if err := g.Do(context.Background(), "gpu0", time.Hour, func() error { t.Error("ran while stuck"); return nil }); !errors.Is(err, ErrStuck) {
		t.Fatalf("second Do = %v, want ErrStuck", err)
	}
	// Other GPUs go on.
	if err := g.Do(context.Background(), "gpu1", time.Second, func() error { return nil }); err != nil {
		t.Fatalf("gpu1: %v", err)
	}
	// Wait gives up at its deadline while the call is stuck...
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want deadline exceeded", err)
	}
	// ...and returns once it comes back; the key is usable again.
	close(release)
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g.Stuck("gpu0") {
		t.Fatal("gpu0 still stuck after the call returned")
	}
}

func TestDoHonoursContext(t *testing.T) {
	g := NewGuard()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release := make(chan struct{})
	defer func() { close(release); _ = g.Wait(context.Background()) }()
	if err := g.Do(ctx, "gpu0", time.Hour, func() error { <-release; return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
}
