package resp

import (
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
)

// TestServe_WatchdogSleeps: with no handler call, the loops' watchdog
// stops looking every watchEvery and sleeps; a call that then waits still
// gets its loop handed over, so the other connections are served.
func TestServe_WatchdogSleeps(t *testing.T) {
	h := newTestHandler()
	s, addr := start(t, h, modes[0].set)
	a, b := dial(t, addr), dial(t, addr)
	a.send("PING")
	a.expect("+PONG")
	s.mu.Lock()
	ls := s.pl.(*loops)
	s.mu.Unlock()
	testwait.For(t, 10*time.Second, "the watchdog asleep", ls.dog.asleep.Load)
	a.send("BLOCK")
	<-h.blocked
	b.send("PING")
	b.expect("+PONG")
	h.unblock()
	a.expect("+UNBLOCKED")
}
