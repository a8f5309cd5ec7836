// Package testwait is the tests' way of waiting for something another
// goroutine or process does: poll a condition with a deadline, never sleep a
// fixed time and hope.
package testwait

import (
	"testing"
	"time"
)

// For polls cond every millisecond until it holds, and fails t when it does
// not within the given time.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
}
