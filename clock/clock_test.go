package clock

import (
	"errors"
	"math"
	"testing"
)

func TestManual(t *testing.T) {
	m := NewManual(100)
	if got := m.Now(); got != 100 {
		t.Fatalf("Now = %d, want 100", got)
	}
	if got, err := m.Advance(50); err != nil || got != 150 {
		t.Fatalf("Advance(50) = %d, %v; want 150, nil", got, err)
	}
	if got, err := m.Advance(-1); !errors.Is(err, ErrBackwards) || got != 150 {
		t.Fatalf("Advance(-1) = %d, %v; want 150, ErrBackwards", got, err)
	}
	m.Set(10) // Set may move backwards: tests model clock steps with it
	if got := m.Now(); got != 10 {
		t.Fatalf("Now after Set(10) = %d", got)
	}
	m.Set(math.MaxInt64 - 1)
	if _, err := m.Advance(2); !errors.Is(err, ErrOverflow) {
		t.Fatalf("Advance past MaxInt64: err = %v, want ErrOverflow", err)
	}
	if got := m.Now(); got != math.MaxInt64-1 {
		t.Fatalf("a refused Advance moved the clock to %d", got)
	}
}
