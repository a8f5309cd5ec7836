package sleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFor_Waits(t *testing.T) {
	start := time.Now()
	if err := For(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v, want at least 20ms", d)
	}
}

// An ended context stops the wait at once, and a zero wait still reports it.
func TestFor_Canceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("waited %v on a canceled context", d)
	}
	if err := For(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("zero wait: err %v, want context.Canceled", err)
	}
	if err := For(context.Background(), -time.Second); err != nil {
		t.Fatalf("negative wait: %v", err)
	}
}
