package pace

import (
	"testing"
	"time"
)

// TestNext: Busy while work is found, doubling up to Idle while none is,
// and Busy again at the first look that finds some.
func TestNext(t *testing.T) {
	p := Pace{Busy: 5 * time.Millisecond, Idle: 30 * time.Millisecond}
	var got []time.Duration
	for _, found := range []bool{true, false, false, false, false, true, false} {
		got = append(got, p.Next(found))
	}
	want := []time.Duration{5, 10, 20, 30, 30, 5, 10}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
}
